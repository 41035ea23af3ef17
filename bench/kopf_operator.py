"""kopf doing the product's job for the comparison: one status write per Model.

Run by the bench as `python -m kopf run bench/kopf_operator.py --standalone -A`, with
BENCH_SERVER naming the test API server, or KUBECONFIG a real apiserver's kubeconfig
(its CA and client certificate, read by kopf's own kubeconfig login). An event handler
with a guard is kopf's cheapest form (no handler progress or last-handled annotations);
Event posting is off, as in the measurements issue 15 quotes. The status it writes is
the product's for that Model (bench.model_writes, learnt at the first Model of each
distinct spec from the server's DeviceClasses, Nodes and ResourceSlices).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

import aiohttp
import kopf

from bench.ceiling import connection
from bench.model_writes import ModelWriter, server_objects


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    if "BENCH_SERVER" in os.environ:
        return kopf.ConnectionInfo(server=os.environ["BENCH_SERVER"], insecure=True)
    return kopf.login_with_kubeconfig(**kwargs)


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.posting.enabled = False
    settings.watching.server_timeout = 3600
    memo.writer = await model_writer()  # each handler gets a shallow copy of this memo


async def model_writer() -> ModelWriter:
    """What the product would read to work out its writes, listed from the same server."""
    server = await connection(os.environ.get("BENCH_SERVER"), os.environ.get("KUBECONFIG"))
    connector = aiohttp.TCPConnector(ssl=server.tls or False)
    async with aiohttp.ClientSession(server.url, connector=connector) as session:
        return ModelWriter(await server_objects(session))


@kopf.on.event("inference.llmkube.dev", "v1alpha1", "models")
async def model_seen(
    type: str, body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **_: Any
) -> None:
    if type == "DELETED" or body.get("status", {}).get("conditions"):
        return
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    writer: ModelWriter = memo.writer
    writes = await writer.writes(dict(body))
    patch.status.update(writes.status_now(now))
