"""Run the test API server: `python -m testserver --port 0` prints the URL it serves."""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
import ssl

from aiohttp import web

from .app import make_app


def parse_simulation(value: str) -> dict[str, int]:
    """ "dra=4,plugin=0[,shared=1]": GPUs reachable through DRA claims and as
    nvidia.com/gpu, and GPUs (DRA) that allow multiple allocations."""
    result = {}
    for part in value.split(","):
        key, _, count = part.partition("=")
        if key not in ("dra", "plugin", "shared") or not count.isdigit():
            raise argparse.ArgumentTypeError(f"expected dra=N,plugin=M[,shared=S], got {value!r}")
        result[key] = int(count)
    return result


async def serve(
    host: str,
    port: int,
    bookmark_interval: float,
    history: int,
    simulate: dict[str, int] | None,
    enforce_schemas: bool = True,
    tls: tuple[str, str] | None = None,
    require_token: bool = False,
    client_ca: str | None = None,
) -> None:
    app = make_app(
        bookmark_interval=bookmark_interval,
        history=history,
        simulate=simulate,
        enforce_schemas=enforce_schemas,
        require_token=require_token,
    )
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
    await runner.setup()
    context = None
    if tls is not None:  # serve HTTPS, as kube-apiserver does, with the given key pair
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(*tls)
        if client_ca:  # as kube-apiserver: verify a client certificate if one is given
            context.load_verify_locations(client_ca)
            context.verify_mode = ssl.CERT_OPTIONAL
    site = web.TCPSite(runner, host, port, ssl_context=context)
    await site.start()
    bound = runner.addresses[0][1]
    # What start-up made (modules, CRD schemas, simulated nodes) lives as long as the
    # process: out of the collector's full passes, which would pause every request.
    gc.collect()  # garbage first: what is frozen is never collected
    gc.freeze()
    print(f"LISTENING {'https' if tls else 'http'}://{host}:{bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--bookmark-interval", type=float, default=1.0)
    parser.add_argument(
        "--history",
        type=int,
        default=10_000,
        help="watch events kept; older resourceVersions answer 410 Gone",
    )
    parser.add_argument(
        "--simulate-cluster",
        type=parse_simulation,
        default=None,
        metavar="dra=N,plugin=M[,shared=S]",
        help="run a simulated cluster (scheduler, DRA allocator, kubelet)",
    )
    parser.add_argument(
        "--no-schema-validation",
        action="store_true",
        help="store custom resources without checking them against their CRD's schema",
    )
    # kube-apiserver's names for its serving certificate and key
    parser.add_argument("--tls-cert-file", help="serve HTTPS with this certificate (PEM)")
    parser.add_argument("--tls-private-key-file", help="the certificate's key (PEM)")
    parser.add_argument(
        "--require-token",
        action="store_true",
        help="answer 401 Unauthorized unless the request carries a live bearer token "
        "minted by POST /_testserver/tokens {ttl: seconds}",
    )
    parser.add_argument(
        "--client-ca-file",
        help="with TLS: accept client certificates signed by this CA (PEM); with "
        "--require-token they authenticate requests",
    )
    args = parser.parse_args()
    if bool(args.tls_cert_file) != bool(args.tls_private_key_file):
        parser.error("--tls-cert-file and --tls-private-key-file go together")
    asyncio.run(
        serve(
            args.host,
            args.port,
            args.bookmark_interval,
            args.history,
            args.simulate_cluster,
            enforce_schemas=not args.no_schema_validation,
            tls=(args.tls_cert_file, args.tls_private_key_file) if args.tls_cert_file else None,
            require_token=args.require_token,
            client_ca=args.client_ca_file,
        )
    )


if __name__ == "__main__":
    main()
