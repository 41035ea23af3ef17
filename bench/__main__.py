"""Benchmarks: `python -m bench` (or `make bench`); see --help for sizes and rates.

In one run: the work queue alone; the pipeline (create -> watch -> reconcile -> status)
at each size for the product, the server's ceiling (bench.ceiling, the same writes on
plain aiohttp) and kopf when installed (`pip install -e '.[bench]'`); steady-load
latency; memory per cached object; InferenceServices whose pods already run; and the
ratios product/ceiling and product/kopf.
Timing is measured here, never asserted in tests. Every process shares the machine's
CPUs: compare ratios from the same run, not absolute figures across machines.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
from datetime import UTC, datetime

from controller import logging as log_setup

from . import harness, queue_bench
from .report import table
from .workload import MODELS, SERVICES, SERVICES_UNDER_QUOTA, SERVICES_WITH_PODS, Workload

# The pipelines compared with the ceiling and kopf (the GPUQuota one is quota_section's).
WORKLOADS: tuple[Workload, ...] = (MODELS,)
PROCESSES = ("sut", "server", "bench")  # whose CPU time per object the pipeline shows


def _load() -> str:
    """The machine's 1-minute load average: other processes share the CPUs."""
    return f"{os.getloadavg()[0]:.2f}"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a and b else "-"


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


async def burst_section(
    workload: Workload, sizes: list[int], suts: list[str], workers: int, repeat: int
) -> list[harness.RunResult]:
    rows, ratios, products = [], [], []
    for n in sizes:
        best: dict[str, harness.RunResult] = {}
        rates: dict[str, float] = {}
        drained: dict[str, float] = {}
        for sut in suts:
            runs = []
            for _ in range(repeat):
                print(f"  {workload.name}: {sut} at {n:,} ...", flush=True)
                runs.append(await harness.run(sut, workload, objects=n, workers=workers))
            rates[sut] = statistics.median(r.per_second for r in runs)
            drained[sut] = statistics.median(r.drained_per_second for r in runs)
            best[sut] = sorted(runs, key=lambda r: r.per_second)[len(runs) // 2]
            r = best[sut]
            cpu = [statistics.median(x.cpu_ms_per_object(p) for x in runs) for p in PROCESSES]
            rows.append([n, sut, rates[sut], drained[sut], r.seconds, r.p50_ms, r.p99_ms, *cpu])
        ratios.append(
            [
                n,
                _ratio(rates.get("product"), rates.get("ceiling")),
                _ratio(drained.get("product"), drained.get("ceiling")),
                _ratio(rates.get("product-quiet"), rates.get("ceiling-quiet")),
                _ratio(rates.get("product-quiet"), rates.get("kopf")),
                _ratio(rates.get("product"), rates.get("kopf")),
            ]
        )
        products += [best[s] for s in ("product", "product-quiet") if s in best]
    print(
        table(
            f"Pipeline, {workload.name}: create -> watch -> reconcile -> status seen "
            f"(median of {repeat}; {workers} workers for product and ceiling; "
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
            "Ratios (same run)",
            [
                "objects",
                "product/ceiling",
                "same, all writes",
                "no Events: product/ceiling",
                "no Events: product/kopf",
                "product (Events)/kopf",
            ],
            ratios,
        )
    )
    return products


def memory_section(products: list[harness.RunResult]) -> None:
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
            "Product process after the burst (cache = informer store; memo = status writer)",
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


async def quota_section(sizes: list[int], workers: int, repeat: int) -> None:
    """InferenceServices in one namespace, without a GPUQuota and under one (product)."""
    rows, ratios = [], []
    for n in sizes:
        seconds: dict[str, float] = {}
        for label, workload in (("without", SERVICES), ("GPUQuota", SERVICES_UNDER_QUOTA)):
            runs = []
            for _ in range(repeat):
                print(f"  {workload.name}: product at {n:,} ...", flush=True)
                runs.append(await harness.run("product", workload, objects=n, workers=workers))
            r = sorted(runs, key=lambda r: r.seconds)[len(runs) // 2]
            seconds[label] = r.seconds
            s = r.stats
            per_object = s.get("reconciles", 0.0) / (s.get("objects") or 1)
            rows.append([n, label, r.per_second, r.seconds, r.p50_ms, r.p99_ms, per_object])
        ratios.append([n, f"{seconds['GPUQuota'] / seconds['without']:.2f}x"])
    print(
        table(
            f"Pipeline, InferenceServices in one namespace (Deployment + Service + status each; "
            f"median of {repeat}; the quota admits 3 in 4, the rest wait at QuotaExceeded)",
            ["services", "GPUQuota", "services/s", "seconds", "p50 ms", "p99 ms", "reconciles/svc"],
            rows,
        )
    )
    print()
    print(table("GPUQuota cost (same run)", ["services", "seconds: with / without"], ratios))


async def pods_section(sizes: list[int], workers: int, repeat: int) -> None:
    """InferenceServices whose pods already exist (one each, same namespace): each
    reconcile looks up its own pods among all of them."""
    rows = []
    for n in sizes:
        runs = []
        for _ in range(repeat):
            print(f"  {SERVICES_WITH_PODS.name}: product at {n:,} ...", flush=True)
            runs.append(
                await harness.run("product", SERVICES_WITH_PODS, objects=n, workers=workers)
            )
        r = sorted(runs, key=lambda r: r.seconds)[len(runs) // 2]
        per_object = r.stats.get("reconciles", 0.0) / (r.stats.get("objects") or 1)
        sut_cpu = statistics.median(x.cpu_ms_per_object("sut") for x in runs)
        rows.append([n, r.per_second, r.seconds, r.p50_ms, r.p99_ms, per_object, sut_cpu])
    print(
        table(
            f"Pipeline, InferenceServices with one pod each in one namespace "
            f"(median of {repeat}; pods created before the services)",
            [
                "services",
                "services/s",
                "seconds",
                "p50 ms",
                "p99 ms",
                "reconciles/svc",
                "CPU sut ms/svc",
            ],
            rows,
        )
    )


async def steady_section(
    workload: Workload, rates: list[float], seconds: float, suts: list[str], workers: int
) -> None:
    rows = []
    for rate in rates:
        for sut in suts:
            print(f"  steady: {sut} at {rate:g}/s for {seconds:g} s ...", flush=True)
            r = await harness.run(sut, workload, rate=rate, seconds=seconds, workers=workers)
            rows.append([f"{rate:g}", sut, r.objects, r.p50_ms, r.p99_ms, r.percentile(0.999)])
    print(
        table(
            f"Steady load, {workload.name}: latency from create to status seen",
            ["objects/s", "system", "objects", "p50 ms", "p99 ms", "p99.9 ms"],
            rows,
        )
    )


async def main(args: argparse.Namespace) -> None:
    suts = [s for s in args.systems.split(",") if s]
    if "kopf" in suts and not harness.kopf_installed():
        print("kopf is not installed (pip install -e '.[bench]'): skipping it\n")
        suts.remove("kopf")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    rates = [float(r) for r in args.rates.split(",") if r]
    print(
        f"llmkube-py bench, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
        f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load average {_load()}\n"
    )
    if args.queue_adds:
        await queue_section(args.queue_adds)
        print()
    for workload in WORKLOADS if sizes else ():
        products = await burst_section(workload, sizes, suts, args.workers, args.repeat)
        print()
        if products:
            memory_section(products)
            print()
        steady_suts = [s for s in suts if s in ("product", "kopf")]
        if rates and steady_suts:
            await steady_section(workload, rates, args.steady_seconds, steady_suts, args.workers)
            print()
    service_sizes = [int(s) for s in args.service_sizes.split(",") if s]
    if service_sizes and "product" in suts:
        await quota_section(service_sizes, args.workers, args.repeat)
        print()
    pod_sizes = [int(s) for s in args.pod_services.split(",") if s]
    if pod_sizes and "product" in suts:
        await pods_section(pod_sizes, args.workers, args.repeat)
        print()
    print(f"Load average at the end: {_load()}")


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
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
    args = parser.parse_args()
    log_setup.configure("error")
    asyncio.run(main(args))


if __name__ == "__main__":
    cli()
