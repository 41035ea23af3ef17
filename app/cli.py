"""`llmkube-controller`: run the controller, or the local demo against the test API server
(`demo --cluster`: against the real control plane of a source checkout).

Flags follow controller-runtime's spelling (--metrics-bind-address,
--health-probe-bind-address, --leader-elect, --zap-log-level); the earlier spellings
(--http-port, --log-level) stay as aliases. `run` is the default command, so
`llmkube-controller --leader-elect` runs the controller. Every flag's default can also
come from an LLMKUBE_* environment variable.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import structlog

from api.source import HF_ENDPOINT
from controller import logging as log_setup
from controller.kube import KubeClient
from controller.manager import DEFAULT_WORKERS, Manager, ManagerConfig
from controller.resources import MODEL
from reconcilers.devices.kueue import KueueSettings, parse_mappings
from reconcilers.devices.managed import CLASS_NAME as DEVICE_CLASS_NAME
from reconcilers.pod_security import DEFAULT_FS_GROUP
from reconcilers.settings import ACCESS_MODES, MODES, CacheSettings, Settings
from runtimes.images import OVERRIDES_ENV, parse_overrides

from .controllers import reconcilers
from .servers import WebhookRunnable, bind_domain_metrics, metrics_runnable

log = structlog.get_logger("main")
COMMANDS = ("run", "demo")
# zap's level names, plus Python's spellings of the same levels.
LOG_LEVELS = {"debug": "debug", "info": "info", "warn": "warning", "warning": "warning"}
LOG_LEVELS |= {"error": "error"}


def _env(name: str, default: str) -> str:
    return os.environ.get(f"LLMKUBE_{name}", default)


def concurrency(value: str) -> dict[str, int]:
    """controller=n pairs, comma separated: each controller's max concurrent reconciles."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in value.split(","))):
        name, sep, count = part.partition("=")
        if not sep or not count.isdigit() or int(count) < 1:
            raise argparse.ArgumentTypeError(f"expected controller=n with n >= 1, got {part!r}")
        out[name.strip()] = int(count)
    return out


def kueue_mappings(value: str) -> dict[str, str]:
    """CLASS=RESOURCE pairs (comma separated; the flag repeats): Kueue's deviceClassMappings."""
    try:
        return parse_mappings([value])
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def host_path_roots(value: str) -> tuple[str, ...]:
    """--allowed-host-path-roots: comma-separated absolute directories (LLMKube's flag)."""
    roots = tuple(r.strip() for r in value.split(",") if r.strip())
    for root in roots:
        if not root.startswith("/") or ".." in root.split("/"):
            raise argparse.ArgumentTypeError(f"{root!r} is not an absolute path without '..'")
    return roots


def hub_endpoint(value: str) -> str:
    """--hf-endpoint: an http(s) URL with a host (a path prefix allowed), no query,
    fragment, credentials or whitespace; the trailing '/' is dropped."""
    url = value.strip().rstrip("/")
    parts = urlsplit(url)
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.query
        or parts.fragment
        or "@" in parts.netloc
        or any(ch.isspace() or ord(ch) < 32 for ch in url)
    ):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a hub URL: http(s)://host[:port][/path], without credentials, "
            "query or fragment"
        )
    return url


def boolean(value: str) -> bool:
    """true or false, as the chart writes a boolean value."""
    if value.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"{value!r} is not true or false")
    return value.lower() == "true"


def device_class(value: str) -> str:
    """--dra-device-class: a DeviceClass name (a DNS subdomain), or empty for the vendor's."""
    if value and not DEVICE_CLASS_NAME.match(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a DeviceClass name")
    return value


def fs_group(value: str) -> int:
    """--default-fsgroup: a group id, 0 for none."""
    if not value.isdigit() or int(value) > 2**31 - 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a group id (0 for none)")
    return int(value)


def bind_address(value: str) -> tuple[str, int] | None:
    """controller-runtime's bind address: ":8080", "127.0.0.1:8080", or "0" for off."""
    if value == "0":
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not [host]:port or 0")
    return host.strip("[]") or "0.0.0.0", int(port)


class _HttpPort(argparse.Action):
    """--http-port N (the earlier flag): probes and metrics together on :N."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        address = ("0.0.0.0", int(str(values)))
        namespace.health_probe_bind_address = address
        namespace.metrics_bind_address = address


def _log_level(value: str) -> str:
    if value.lower() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(
            f"invalid choice {value!r} (choose from {', '.join(LOG_LEVELS)})"
        )
    return LOG_LEVELS[value.lower()]


def _add_log_level(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument(
        "--zap-log-level",
        "--log-level",
        dest="log_level",
        type=_log_level,
        default=_log_level(default),
        metavar="{" + ",".join(LOG_LEVELS) + "}",
        help=f"least severe level logged (alias --log-level; default {default})",
    )


def _add_run_flags(run: argparse.ArgumentParser) -> None:
    legacy = _env("HTTP_PORT", "")  # the earlier LLMKUBE_HTTP_PORT: both on one port
    run.add_argument(
        "--metrics-bind-address",
        type=bind_address,
        default=bind_address(_env("METRICS_BIND_ADDRESS", f":{legacy or 8080}")),
        help="address of /metrics; 0 disables it (default :8080)",
    )
    run.add_argument(
        "--health-probe-bind-address",
        type=bind_address,
        default=bind_address(_env("HEALTH_PROBE_BIND_ADDRESS", f":{legacy or 8081}")),
        help="address of /healthz and /readyz; 0 disables them (default :8081)",
    )
    run.add_argument(
        "--http-port",
        action=_HttpPort,
        type=int,
        help="alias: serve metrics and probes together on this port",
    )
    run.add_argument(
        "--leader-elect",
        action="store_true",
        default=_env("LEADER_ELECT", "false") == "true",
        help="elect one active replica through a Lease (for replicas > 1)",
    )
    run.add_argument(
        "--lease-namespace",
        default=_env("LEASE_NAMESPACE", "llmkube-system"),
        help="namespace of the leader-election Lease (default llmkube-system)",
    )
    run.add_argument(
        "--identity",
        default=_env("IDENTITY", socket.gethostname()),
        help="this replica's name in the Lease (default: the host name)",
    )
    _add_log_level(run, _env("LOG_LEVEL", "info"))
    run.add_argument(
        "--kubeconfig",
        default=os.environ.get("KUBECONFIG"),
        help="kubeconfig file, when not running in a cluster (default $KUBECONFIG)",
    )
    run.add_argument(
        "--server",
        default=_env("SERVER", ""),
        help="API server URL (default: in-cluster config, then kubeconfig)",
    )
    run.add_argument(
        "--namespace",
        default=_env("NAMESPACE", ""),
        help="watch only this namespace (default: all)",
    )
    run.add_argument(
        "--workers",
        type=int,
        default=int(_env("WORKERS", str(DEFAULT_WORKERS))),
        help=f"max concurrent reconciles of each controller (default {DEFAULT_WORKERS})",
    )
    run.add_argument(
        "--max-concurrent-reconciles",
        type=concurrency,
        default=concurrency(_env("MAX_CONCURRENT_RECONCILES", "gpuquota=2")),
        help="per-controller override of --workers, e.g. model=16,gpuquota=2 (default gpuquota=2)",
    )
    run.add_argument(
        "--kueue-device-class-mapping",
        dest="kueue_device_class_mappings",
        type=kueue_mappings,
        action="append",
        default=[kueue_mappings(_env("KUEUE_DEVICE_CLASS_MAPPING", ""))],
        metavar="CLASS=RESOURCE",
        help="a DeviceClass and the resource Kueue's deviceClassMappings charge it as, "
        "e.g. gpu.nvidia.com=nvidia.com/gpu (repeatable): Kueue-labelled services get "
        "KueueCompatible=False for other classes, and status.kueue shows the charge",
    )
    run.add_argument(
        "--managed-dra-claims",
        type=boolean,
        default=boolean(_env("MANAGED_DRA_CLAIMS", "true")),
        metavar="true|false",
        help="make a ResourceClaimTemplate, owned by the InferenceService, for a GPU Model "
        "that names no resourceClaims where no node advertises the vendor's device-plugin "
        "resource and a DeviceClass for the vendor exists (default true)",
    )
    run.add_argument(
        "--dra-device-class",
        type=device_class,
        default=device_class(_env("DRA_DEVICE_CLASS", "")),
        metavar="CLASS",
        help="the DeviceClass those templates ask for (default: the vendor's, "
        "gpu.nvidia.com, gpu.amd.com or gpu.intel.com); a service's "
        "inference.llmkube.dev/dra-device-class annotation wins",
    )
    run.add_argument(
        "--allowed-host-path-roots",
        type=host_path_roots,
        default=host_path_roots(_env("ALLOWED_HOST_PATH_ROOTS", "")),
        metavar="DIR[,DIR...]",
        help="directories under which file:// and absolute-path Model sources are mounted "
        "(hostPath, read-only); default none: such sources are refused (SourceNotAllowed)",
    )
    run.add_argument(
        "--hf-endpoint",
        type=hub_endpoint,
        default=os.environ.get("HF_ENDPOINT") or HF_ENDPOINT,  # a string: argparse checks it
        metavar="URL",
        help=f"the Hugging Face hub (or mirror) hub sources download from, and the only host "
        f"the HF token is sent to (env HF_ENDPOINT, as huggingface_hub reads it; default "
        f"{HF_ENDPOINT})",
    )
    run.add_argument(
        "--allow-any-extra-volume-host-path",
        action="store_true",
        default=_env("ALLOW_ANY_EXTRA_VOLUME_HOST_PATH", "false") == "true",
        help="let InferenceServices' extraVolumes mount any hostPath (default: only under "
        "--allowed-host-path-roots; others are refused, SourceNotAllowed)",
    )
    run.add_argument(
        "--default-fsgroup",
        type=fs_group,
        default=fs_group(_env("DEFAULT_FSGROUP", str(DEFAULT_FS_GROUP))),
        metavar="GID",
        help="fsGroup of the serving and prefetch pods whose podSecurityContext sets none "
        f"(LLMKube's flag; default {DEFAULT_FS_GROUP}, the loader image's group; 0: none, "
        "e.g. where OpenShift's SCC assigns one)",
    )
    run.add_argument(
        "--model-cache",
        choices=("enabled", "disabled"),
        default=_env("MODEL_CACHE", "disabled"),
        help="stage downloaded Model files in a cache PVC every replica and restart reuses "
        "(default disabled: each pod downloads into an emptyDir)",
    )
    run.add_argument(
        "--model-cache-mode",
        choices=MODES,
        default=_env("MODEL_CACHE_MODE", "shared"),
        help="shared: one PVC llmkube-model-cache per namespace; perService: "
        "<isvc>-model-cache, ReadWriteOnce, owned by the InferenceService",
    )
    run.add_argument(
        "--model-cache-size",
        default=_env("MODEL_CACHE_SIZE", "100Gi"),
        help="the cache PVC's storage request (default 100Gi)",
    )
    run.add_argument(
        "--model-cache-storage-class",
        default=_env("MODEL_CACHE_STORAGE_CLASS", ""),
        help="the cache PVC's storageClassName (default: the cluster's default class)",
    )
    run.add_argument(
        "--model-cache-access-mode",
        choices=ACCESS_MODES,
        default=_env("MODEL_CACHE_ACCESS_MODE", "ReadWriteOnce"),
        help="the shared cache PVC's access mode (a perService cache is ReadWriteOnce)",
    )
    run.add_argument(
        "--webhook-port",
        type=int,
        default=int(_env("WEBHOOK_PORT", "0")),
        help="serve the validating webhook over TLS on this port (default 0: off)",
    )
    run.add_argument(
        "--webhook-cert-dir",
        "--webhook-cert-path",
        default=_env("WEBHOOK_CERT_DIR", "/tmp/k8s-webhook-server/serving-certs"),
        help="directory holding the webhook's tls.crt and tls.key (reloaded when they change)",
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="llmkube-controller",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", metavar="{run,demo}")
    run = sub.add_parser(
        "run", help="reconcile Models, InferenceServices and GPUQuotas (the default)"
    )
    _add_run_flags(run)
    demo = sub.add_parser(
        "demo",
        help="run the seed-guide examples against the test API server "
        "(--cluster: the real control plane)",
    )
    _add_log_level(demo, "warning")
    demo.add_argument(
        "--keep-running",
        action="store_true",
        help="keep the API server and controller up after the walk-through",
    )
    demo.add_argument(
        "--cluster",
        action="store_true",
        help="run it on the real control plane of the source checkout (devcluster/: "
        "kube-apiserver, the scheduler allocating DRA claims, kwok nodes) instead of the "
        "test API server; `make demo-cluster`",
    )
    return p


def parse(argv: list[str]) -> argparse.Namespace:
    """`run` is implied unless the first argument names a command or asks for help.
    The chart's runtimeImages come from LLMKUBE_RUNTIME_IMAGES: a bad value is an error
    of the command line, as a bad flag is."""
    if not argv or argv[0] not in (*COMMANDS, "-h", "--help"):
        argv = ["run", *argv]
    p = parser()
    args = p.parse_args(argv)
    try:
        args.runtime_images = parse_overrides(os.environ.get(OVERRIDES_ENV, ""))
    except ValueError as e:
        p.error(str(e))
    return args


def manager_for(client: KubeClient, args: argparse.Namespace) -> Manager:
    probes: tuple[str, int] | None = args.health_probe_bind_address
    metrics: tuple[str, int] | None = args.metrics_bind_address
    config = ManagerConfig(
        namespace=args.namespace or None,
        workers=args.workers,
        max_concurrent_reconciles=args.max_concurrent_reconciles,
        http_host=probes[0] if probes else "0.0.0.0",
        http_port=probes[1] if probes else None,
        leader_election=args.leader_elect,
        lease_namespace=args.lease_namespace,
        identity=args.identity,
    )
    mappings: dict[str, str] = {}
    for m in args.kueue_device_class_mappings:
        mappings.update(m)
    roots: tuple[str, ...] = args.allowed_host_path_roots
    cache_settings = CacheSettings(
        enabled=args.model_cache == "enabled",
        mode=args.model_cache_mode,
        size=args.model_cache_size,
        storage_class=args.model_cache_storage_class or None,
        access_mode=args.model_cache_access_mode,
    )
    settings = Settings(
        model_cache=cache_settings,
        allowed_host_path_roots=roots,
        kueue=KueueSettings(mappings),
        allow_any_extra_volume_host_path=args.allow_any_extra_volume_host_path,
        default_fs_group=args.default_fsgroup,
        hf_endpoint=args.hf_endpoint,
        runtime_images=args.runtime_images,
        managed_claims=args.managed_dra_claims,
        dra_device_class=args.dra_device_class or None,
    )
    manager = Manager(client, config, reconcilers=reconcilers(settings))
    bind_domain_metrics(manager)
    if args.webhook_port:
        cache = manager.cache
        webhook = WebhookRunnable(
            args.webhook_cert_dir,
            args.webhook_port,
            lookup=lambda ns, name: cache.get(MODEL, ns, name),
            roots=roots,
            any_host_path=args.allow_any_extra_volume_host_path,
        )
        manager.runnables.append(webhook)
        manager.ready_checks["webhook"] = webhook.listening
    # The probe server also answers /metrics; a different address gets a server of its own.
    if metrics is not None and metrics != probes:
        manager.runnables.append(metrics_runnable(manager.metrics.registry, *metrics))
    return manager


async def run(args: argparse.Namespace) -> int:
    client = await KubeClient.connect(
        args.server or None,
        args.kubeconfig,
        pool_size=max(8, args.workers * 2),
        user_agent=f"llmkube-controller/{args.identity}",
    )
    manager = manager_for(client, args)
    if manager.elector is not None:
        # Fence this process's writes on the lease: none leave once leadership may be gone.
        client.fence = manager.elector.may_write
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, lambda: asyncio.ensure_future(manager.stop()))
    log.info(
        "starting",
        workers=args.workers,
        namespace=args.namespace or "*",
        leader_election=args.leader_elect,
    )
    try:
        await manager.run()
    finally:
        await client.close()
    # Stopped because leadership was lost: exit non-zero so the pod restarts as a standby.
    lost = manager.elector is not None and manager.elector.lost.is_set()
    return 1 if lost else 0


def main(argv: list[str] | None = None) -> None:
    args = parse(sys.argv[1:] if argv is None else argv)
    log_setup.configure(args.log_level)
    if args.command == "demo":
        from .demo import demo

        try:
            sys.exit(asyncio.run(demo(keep_running=args.keep_running, cluster=args.cluster)))
        except KeyboardInterrupt:  # Ctrl-C: the demo stopped its API server on the way out
            sys.exit(130)
    sys.exit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
