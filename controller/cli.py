"""`llmkube-controller`: run the controller, or the local demo against the test API server."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys

import structlog

from . import logging as log_setup
from .kube import KubeClient
from .manager import Manager, ManagerConfig

log = structlog.get_logger("main")


def _env(name: str, default: str) -> str:
    return os.environ.get(f"LLMKUBE_{name}", default)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="llmkube-controller", description=__doc__)
    sub = p.add_subparsers(dest="command")
    run = sub.add_parser("run", help="reconcile Models, InferenceServices and GPUQuotas")
    run.add_argument(
        "--server",
        default=_env("SERVER", ""),
        help="API server URL (default: in-cluster config, then kubeconfig)",
    )
    run.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    run.add_argument(
        "--namespace",
        default=_env("NAMESPACE", ""),
        help="watch only this namespace (default: all)",
    )
    run.add_argument("--workers", type=int, default=int(_env("WORKERS", "4")))
    run.add_argument(
        "--http-port",
        type=int,
        default=int(_env("HTTP_PORT", "8080")),
        help="port of /healthz, /readyz and /metrics",
    )
    run.add_argument(
        "--leader-elect", action="store_true", default=_env("LEADER_ELECT", "false") == "true"
    )
    run.add_argument("--lease-namespace", default=_env("LEASE_NAMESPACE", "llmkube-system"))
    run.add_argument("--identity", default=_env("IDENTITY", socket.gethostname()))
    run.add_argument(
        "--webhook-port",
        type=int,
        default=int(_env("WEBHOOK_PORT", "0")),
        help="serve the validating webhook over TLS on this port (0: off)",
    )
    run.add_argument(
        "--webhook-cert-dir",
        default=_env("WEBHOOK_CERT_DIR", "/tmp/k8s-webhook-server/serving-certs"),
    )
    run.add_argument("--log-level", default=_env("LOG_LEVEL", "info"))
    demo = sub.add_parser("demo", help="run the seed-guide examples against the test API server")
    demo.add_argument("--log-level", default="warning")
    demo.add_argument(
        "--keep-running",
        action="store_true",
        help="keep the API server and controller up after the walk-through",
    )
    return p


async def run(args: argparse.Namespace) -> int:
    client = await KubeClient.connect(
        args.server or None,
        args.kubeconfig,
        pool_size=max(8, args.workers * 2),
        user_agent=f"llmkube-controller/{args.identity}",
    )
    manager = Manager(
        client,
        ManagerConfig(
            namespace=args.namespace or None,
            workers=args.workers,
            http_port=args.http_port,
            leader_election=args.leader_elect,
            lease_namespace=args.lease_namespace,
            identity=args.identity,
        ),
    )
    if manager.elector is not None:
        # Fence this process's writes on the lease: none leave once leadership may be gone.
        client.fence = manager.elector.may_write
    webhook = None
    if args.webhook_port:
        from webhook.server import start_webhook

        webhook = await start_webhook(args.webhook_cert_dir, args.webhook_port)
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
        if webhook is not None:
            await webhook.cleanup()
        await client.close()
    # Stopped because leadership was lost: exit non-zero so the pod restarts as a standby.
    lost = manager.elector is not None and manager.elector.lost.is_set()
    return 1 if lost else 0


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    if args.command is None:
        args = parser().parse_args(["run", *(argv or sys.argv[1:])])
    log_setup.configure(args.log_level)
    if args.command == "demo":
        from .demo import demo

        sys.exit(asyncio.run(demo(keep_running=args.keep_running)))
    sys.exit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
