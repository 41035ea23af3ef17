"""Benchmarks: `python -m bench` (or `make bench`); see --help for sizes and rates.

In one run: the work queue alone; the pipeline (create -> watch -> reconcile -> status)
at each size for the product, the server's ceiling (bench.ceiling, the same writes on
plain aiohttp) and kopf when installed (`pip install -e '.[bench]'`); steady-load
latency; memory per cached object; InferenceServices whose pods already exist; and the
ratios product/ceiling and product/kopf. All of it on the test API server, then on the
real kube-apiserver (bench.kube, `--servers`, `--kube-*` sizes; skipped, saying why,
where its binaries are not built), and the two servers' figures side by side where they
ran the same size.
Timing is measured here, never asserted in tests. Every process shares the machine's
CPUs: compare ratios from the same run, not absolute figures across machines.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from controller import logging as log_setup

from . import harness, kube, queue_bench
from .report import table
from .workload import MODELS, SERVICES, SERVICES_UNDER_QUOTA, SERVICES_WITH_PODS, Workload

# The pipelines compared with the ceiling and kopf (the GPUQuota one is quota_section's).
WORKLOADS: tuple[Workload, ...] = (MODELS,)
PROCESSES = ("sut", "server", "bench")  # whose CPU time per object the pipeline shows
# The ratios of the pipeline: name, numerator and denominator system, "status" (until the
# last status was seen) or "drained" (until the Events were written too).
RATIOS = (
    ("product/ceiling", "product", "ceiling", "status"),
    ("same, all writes", "product", "ceiling", "drained"),
    ("no Events: product/ceiling", "product-quiet", "ceiling-quiet", "status"),
    ("no Events: product/kopf", "product-quiet", "kopf", "status"),
    ("product (Events)/kopf", "product", "kopf", "status"),
)


@dataclass
class Figures:
    """What one server's sections measured, for the comparison of the two servers."""

    server: str
    # (objects, system) -> {"status": per second, "drained": per second, "CPU <process>": ms}
    models: dict[tuple[int, str], dict[str, float]] = field(default_factory=dict)
    # services -> {"services/s", "reconciles/svc", "CPU sut", "CPU server", and with the
    # ceiling run "product/ceiling"}
    pods: dict[int, dict[str, float]] = field(default_factory=dict)

    def ratio(self, n: int, name: str) -> float | None:
        spec = next(r for r in RATIOS if r[0] == name)
        _, top, bottom, what = spec
        a, b = self.models.get((n, top)), self.models.get((n, bottom))
        return a[what] / b[what] if a and b and b[what] else None


def _load() -> str:
    """The machine's 1-minute load average: other processes share the CPUs."""
    return f"{os.getloadavg()[0]:.2f}"


def _times(x: float | None) -> str:
    return f"{x:.2f}x" if x is not None else "-"


async def queue_section(adds: int) -> None:
    queue = await queue_bench.run(adds=adds, keys=max(1, adds // 10))
    baseline = queue[0]
    print(
        table(
            f"Work queue alone: {adds:,} adds over {adds // 10:,} keys",
            ["queue", "adds/s", "vs baseline", "processed", "dedup (adds/item)", "drain items/s"],
            [
                [
                    r.name,
                    r.add_rate,
                    f"{r.add_rate / baseline.add_rate:.2f}x",
                    r.processed,
                    f"{r.dedup:.1f}x",
                    r.drain_rate,
                ]
                for r in queue
            ],
        )
    )


async def take_turns(
    workload: Workload,
    n: int,
    suts: Sequence[str],
    workers: int,
    repeat: int,
    server: harness.Server,
) -> dict[str, list[harness.RunResult]]:
    """`repeat` runs of each system at n objects, the systems taking turns (one run each
    a round), so that a change in the machine's load weighs on all of them alike."""
    done: dict[str, list[harness.RunResult]] = {sut: [] for sut in suts}
    for _ in range(repeat):
        for sut in suts:
            print(f"  {workload.name}: {sut} at {n:,} on the {server.name} ...", flush=True)
            done[sut].append(
                await harness.run(sut, workload, objects=n, workers=workers, server=server)
            )
    return done


async def burst_section(
    workload: Workload,
    sizes: list[int],
    suts: list[str],
    workers: int,
    repeat: int,
    server: harness.Server,
    figures: Figures,
) -> list[harness.RunResult]:
    rows, ratios, products = [], [], []
    for n in sizes:
        best: dict[str, harness.RunResult] = {}
        rates: dict[str, float] = {}
        drained: dict[str, float] = {}
        done = await take_turns(workload, n, suts, workers, repeat, server)
        for sut in suts:
            runs = done[sut]
            rates[sut] = statistics.median(r.per_second for r in runs)
            drained[sut] = statistics.median(r.drained_per_second for r in runs)
            best[sut] = sorted(runs, key=lambda r: r.per_second)[len(runs) // 2]
            r = best[sut]
            cpu = [statistics.median(x.cpu_ms_per_object(p) for x in runs) for p in PROCESSES]
            rows.append([n, sut, rates[sut], drained[sut], r.seconds, r.p50_ms, r.p99_ms, *cpu])
            figures.models[n, sut] = {
                "status": rates[sut],
                "drained": drained[sut],
                **{f"CPU {p}": c for p, c in zip(PROCESSES, cpu, strict=True)},
            }
        ratios.append([n, *(_times(figures.ratio(n, name)) for name, *_ in RATIOS)])
        products += [best[s] for s in ("product", "product-quiet") if s in best]
    print(
        table(
            f"Pipeline, {workload.name}, on the {server.name}: create -> watch -> reconcile "
            f"-> status seen (median of {repeat}, the systems taking turns; {workers} workers "
            "for product and ceiling; "
            "'all writes/s' also waits for the Events; -quiet and kopf write none; "
            "CPU ms per object of each process until the last status was seen)",
            [
                "objects",
                "system",
                "status/s",
                "all writes/s",
                "seconds",
                "p50 ms",
                "p99 ms",
                *(f"CPU {p}" for p in PROCESSES),
            ],
            rows,
        )
    )
    print()
    print(
        table(
            f"Ratios on the {server.name} (same run)",
            ["objects", *(name for name, *_ in RATIOS)],
            ratios,
        )
    )
    return products


def memory_section(products: list[harness.RunResult], server: harness.Server) -> None:
    rows = []
    for r in products:
        s = r.stats
        objects = s.get("objects") or 1
        rows.append(
            [
                r.objects,
                r.sut,
                s.get("cache_bytes_per_object", 0.0),
                s.get("memo_bytes_per_object", 0.0),
                s.get("rss_bytes_per_object", 0.0),
                s.get("reconciles", 0.0) / objects,
                int(s.get("events_written", 0)),
                int(s.get("events_dropped", 0)),
                sum(s.get("gc_seconds", [])) * 1000 / objects,
            ]
        )
    print(
        table(
            f"Product process after the burst on the {server.name} "
            "(cache = informer store; memo = status writer)",
            [
                "objects",
                "system",
                "cache B/object",
                "memo B/object",
                "RSS B/object",
                "reconciles/object",
                "events written",
                "events dropped",
                "GC ms/object",
            ],
            rows,
        )
    )


async def quota_section(
    sizes: list[int], workers: int, repeat: int, server: harness.Server
) -> None:
    """InferenceServices in one namespace, without a GPUQuota and under one (product)."""
    rows, ratios = [], []
    for n in sizes:
        seconds: dict[str, float] = {}
        for label, workload in (("without", SERVICES), ("GPUQuota", SERVICES_UNDER_QUOTA)):
            runs = []
            for _ in range(repeat):
                print(f"  {workload.name}: product at {n:,} on the {server.name} ...", flush=True)
                runs.append(
                    await harness.run(
                        "product", workload, objects=n, workers=workers, server=server
                    )
                )
            r = sorted(runs, key=lambda r: r.seconds)[len(runs) // 2]
            seconds[label] = r.seconds
            s = r.stats
            per_object = s.get("reconciles", 0.0) / (s.get("objects") or 1)
            rows.append([n, label, r.per_second, r.seconds, r.p50_ms, r.p99_ms, per_object])
        ratios.append([n, f"{seconds['GPUQuota'] / seconds['without']:.2f}x"])
    print(
        table(
            f"Pipeline, InferenceServices in one namespace, on the {server.name} (Deployment "
            f"+ Service + status each; median of {repeat}; the quota admits 3 in 4, the rest "
            "wait at QuotaExceeded)",
            ["services", "GPUQuota", "services/s", "seconds", "p50 ms", "p99 ms", "reconciles/svc"],
            rows,
        )
    )
    print()
    print(
        table(
            f"GPUQuota cost on the {server.name} (same run)",
            ["services", "seconds: with / without"],
            ratios,
        )
    )


def pods_line(server: str, ratio: float, reconciles: float) -> str:
    """The pod-services summary a script reads, one per server after its table."""
    where = "on kube-apiserver" if server.startswith("kube-apiserver") else f"on the {server}"
    return f"pod-services {where}: product/ceiling {ratio:.2f}, reconciles/svc {reconciles:.1f}"


async def pods_section(
    sizes: list[int],
    suts: list[str],
    workers: int,
    repeat: int,
    server: harness.Server,
    figures: Figures,
) -> None:
    """InferenceServices whose pods already exist (one each, same namespace): each
    reconcile looks up its own pods among all of them. On the real apiserver the pods
    run (scheduled, and Running and Ready on kwok nodes) before the product starts.
    The ceiling (bench.services_ceiling) sends the product's writes for each service."""
    rows, line = [], ""
    systems = [s for s in ("product", "ceiling") if s in suts]
    for n in sizes:
        rates: dict[str, float] = {}
        runs = await take_turns(SERVICES_WITH_PODS, n, systems, workers, repeat, server)
        for sut in systems:
            done = runs[sut]
            r = sorted(done, key=lambda r: r.seconds)[len(done) // 2]
            rates[sut] = statistics.median(x.per_second for x in done)
            per_object = statistics.median(
                x.stats.get("reconciles", 0.0) / (x.stats.get("objects") or 1) for x in done
            )
            sut_cpu = statistics.median(x.cpu_ms_per_object("sut") for x in done)
            server_cpu = statistics.median(x.cpu_ms_per_object("server") for x in done)
            reconciles = per_object if sut == "product" else "-"
            rows.append(
                [n, sut, rates[sut], r.seconds, r.p50_ms, r.p99_ms, reconciles, sut_cpu, server_cpu]
            )
            if sut == "product":
                figures.pods[n] = {
                    "services/s": rates[sut],
                    "reconciles/svc": per_object,
                    "CPU sut": sut_cpu,
                    "CPU server": server_cpu,
                }
        if "product" in rates and rates.get("ceiling"):
            ratio = rates["product"] / rates["ceiling"]
            figures.pods[n]["product/ceiling"] = ratio
            line = pods_line(server.name, ratio, figures.pods[n]["reconciles/svc"])
    print(
        table(
            f"Pipeline, InferenceServices with one pod each in one namespace, on the "
            f"{server.name} (median of {repeat}, product and ceiling alternating; pods created "
            "before the services; ceiling: the product's writes for each service, "
            "bench/services_ceiling.py)",
            [
                "services",
                "system",
                "services/s",
                "seconds",
                "p50 ms",
                "p99 ms",
                "reconciles/svc",
                "CPU sut ms/svc",
                "CPU server ms/svc",
            ],
            rows,
        )
    )
    if line:  # the largest size's, in the form a script reads, below the table
        print()
        print(line)


async def steady_section(
    workload: Workload,
    rates: list[float],
    seconds: float,
    suts: list[str],
    workers: int,
    server: harness.Server,
) -> None:
    rows = []
    for rate in rates:
        for sut in suts:
            print(
                f"  steady: {sut} at {rate:g}/s for {seconds:g} s on the {server.name} ...",
                flush=True,
            )
            r = await harness.run(
                sut, workload, rate=rate, seconds=seconds, workers=workers, server=server
            )
            rows.append([f"{rate:g}", sut, r.objects, r.p50_ms, r.p99_ms, r.percentile(0.999)])
    print(
        table(
            f"Steady load, {workload.name}, on the {server.name}: latency from create to "
            "status seen",
            ["objects/s", "system", "objects", "p50 ms", "p99 ms", "p99.9 ms"],
            rows,
        )
    )


SERVERS = ("testserver", "kube")


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


@dataclass(frozen=True)
class Sizes:
    """What one server runs: burst sizes, GPUQuota sizes, services with pods, rates."""

    models: list[int]
    services: list[int]
    pods: list[int]
    rates: list[float]


async def server_sections(
    server: harness.Server, sizes: Sizes, suts: list[str], args: argparse.Namespace
) -> Figures:
    figures = Figures(server.name)
    for workload in WORKLOADS if sizes.models else ():
        products = await burst_section(
            workload, sizes.models, suts, args.workers, args.repeat, server, figures
        )
        print()
        if products:
            memory_section(products, server)
            print()
        steady_suts = [s for s in suts if s in ("product", "kopf")]
        if sizes.rates and steady_suts:
            await steady_section(
                workload, sizes.rates, args.steady_seconds, steady_suts, args.workers, server
            )
            print()
    if sizes.services and "product" in suts:
        await quota_section(sizes.services, args.workers, args.repeat, server)
        print()
    if sizes.pods and "product" in suts:
        await pods_section(sizes.pods, suts, args.workers, args.repeat, server, figures)
        print()
    return figures


async def kube_sections(sizes: Sizes, suts: list[str], args: argparse.Namespace) -> Figures | None:
    """The same sections on the real control plane; None, saying why, where it cannot run."""
    reason = kube.unavailable()
    if reason is not None:
        print(f"Real apiserver skipped: {reason}\n")
        return None
    nodes = kube.nodes_for(max(sizes.pods, default=0))
    print(f"  starting the real control plane ({nodes} kwok nodes) ...", flush=True)
    server = await kube.KubeServer.start(nodes=nodes)
    try:
        return await server_sections(server, sizes, suts, args)
    finally:
        await server.stop()


def servers_section(test: Figures, real: Figures) -> None:
    """Both servers' figures side by side, for the sizes both ran."""
    pairs = sorted((k for k in test.models if k in real.models), key=lambda k: k[0])
    sizes = sorted({n for n, _ in pairs})
    if pairs:
        rows: list[list[object]] = []
        for n, sut in pairs:
            t, k = test.models[n, sut], real.models[n, sut]
            rows.append(
                [
                    n,
                    sut,
                    t["status"],
                    k["status"],
                    _times(k["status"] / t["status"]),
                    t["CPU sut"],
                    k["CPU sut"],
                    t["CPU server"],
                    k["CPU server"],
                ]
            )
        print(
            table(
                f"Models on both servers (same run): test = the {test.server}, kube = the "
                f"{real.server} (server CPU: kube-apiserver and etcd)",
                [
                    "objects",
                    "system",
                    "status/s test",
                    "status/s kube",
                    "kube/test",
                    "CPU sut test",
                    "CPU sut kube",
                    "CPU server test",
                    "CPU server kube",
                ],
                rows,
            )
        )
        print()
        ratio_rows = [
            [n, name, _times(test.ratio(n, name)), _times(real.ratio(n, name))]
            for n in sizes
            for name, *_ in RATIOS
            if test.ratio(n, name) is not None or real.ratio(n, name) is not None
        ]
        print(
            table(
                "Ratios on both servers (same run)",
                ["objects", "ratio", "test", "kube"],
                ratio_rows,
            )
        )
        print()
    services = sorted(test.pods.keys() & real.pods.keys())
    if services:
        pod_rows: list[list[object]] = []
        for n in services:
            t, k = test.pods[n], real.pods[n]
            pod_rows.append(
                [
                    n,
                    t["services/s"],
                    k["services/s"],
                    _times(k["services/s"] / t["services/s"]),
                    t["reconciles/svc"],
                    k["reconciles/svc"],
                    t["CPU sut"],
                    k["CPU sut"],
                    t["CPU server"],
                    k["CPU server"],
                    _times(t.get("product/ceiling")),
                    _times(k.get("product/ceiling")),
                ]
            )
        print(
            table(
                "InferenceServices with one pod each on both servers (same run; on kube the "
                "pods run)",
                [
                    "services",
                    "services/s test",
                    "services/s kube",
                    "kube/test",
                    "reconciles/svc test",
                    "reconciles/svc kube",
                    "CPU sut test",
                    "CPU sut kube",
                    "CPU server test",
                    "CPU server kube",
                    "product/ceiling test",
                    "product/ceiling kube",
                ],
                pod_rows,
            )
        )
        print()
    if not pairs and not services:
        print(
            "No size ran on both servers: give --sizes and --kube-sizes (or --pod-services "
            "and --kube-pod-services) a size in common to compare them\n"
        )


async def main(args: argparse.Namespace) -> None:
    suts = [s for s in args.systems.split(",") if s]
    if "kopf" in suts and not harness.kopf_installed():
        print("kopf is not installed (pip install -e '.[bench]'): skipping it\n")
        suts.remove("kopf")
    servers = [s for s in args.servers.split(",") if s]
    print(
        f"llmkube-py bench, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
        f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load average {_load()}\n"
    )
    if args.queue_adds:
        await queue_section(args.queue_adds)
        print()
    test = real = None
    if "testserver" in servers:
        sizes = Sizes(
            _ints(args.sizes),
            _ints(args.service_sizes),
            _ints(args.pod_services),
            [float(r) for r in args.rates.split(",") if r],
        )
        test = await server_sections(harness.TEST_SERVER, sizes, suts, args)
    if "kube" in servers:
        sizes = Sizes(
            _ints(args.kube_sizes),
            _ints(args.kube_service_sizes),
            _ints(args.kube_pod_services),
            [float(r) for r in args.kube_rates.split(",") if r],
        )
        real = await kube_sections(sizes, suts, args)
    if test is not None and real is not None:
        servers_section(test, real)
    print(f"Load average at the end: {_load()}")


def _servers(text: str) -> str:
    unknown = [s for s in text.split(",") if s and s not in SERVERS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown server {unknown[0]!r}: choose from {', '.join(SERVERS)}"
        )
    return text


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--sizes", default="1000,10000", help="burst sizes, comma separated")
    parser.add_argument(
        "--systems",
        default="product,ceiling,product-quiet,ceiling-quiet,kopf",
        help="-quiet: without Events, as kopf runs",
    )
    parser.add_argument(
        "--service-sizes",
        default="1000,3000",
        help="InferenceServices, with and without a GPUQuota; empty skips them",
    )
    parser.add_argument(
        "--pod-services",
        default="3000",
        help="InferenceServices with one running pod each; empty skips them",
    )
    parser.add_argument("--workers", type=int, default=16, help="for product and ceiling")
    parser.add_argument("--repeat", type=int, default=1, help="runs per size; the median counts")
    parser.add_argument("--rates", default="50,200", help="steady loads, objects/s")
    parser.add_argument("--steady-seconds", type=float, default=10.0)
    parser.add_argument("--queue-adds", type=int, default=200_000, help="0 skips the queue")
    parser.add_argument(
        "--servers",
        type=_servers,
        default="testserver,kube",
        help="testserver: a fresh test API server process per run; kube: the real "
        "kube-apiserver, etcd, controllers and kwok nodes of devcluster/ (skipped where "
        "`make kube-binaries` has not built them)",
    )
    parser.add_argument("--kube-sizes", default="500", help="--sizes on the real apiserver")
    parser.add_argument(
        "--kube-service-sizes", default="", help="--service-sizes on the real apiserver"
    )
    parser.add_argument(
        "--kube-pod-services",
        default="100",
        help="--pod-services on the real apiserver (its pods Running on kwok nodes)",
    )
    parser.add_argument("--kube-rates", default="", help="--rates on the real apiserver")
    return parser


def cli() -> None:
    args = parser().parse_args()
    log_setup.configure("error")
    asyncio.run(main(args))


if __name__ == "__main__":
    cli()
