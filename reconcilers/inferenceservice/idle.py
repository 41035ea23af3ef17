"""Asking a service's replicas whether they are serving a request (rolloutPolicy.waitForIdle).

Each replica is asked directly, at its pod's IP and the port its runtime container
listens on (the container port named `http` of the pod as it runs, which may differ from
the spec being rolled out), with the runtime's idle signal (runtimes/idle.py). Every pod
is asked at once, each with a PROBE_TIMEOUT second deadline, so a reconcile waits at most
that long for any number of replicas and is never hung by one that does not answer.

An answer that cannot be had or read (no connection, a timeout, an error status, a body
that is not what the runtime sends, an answer over MAX_ANSWER bytes) is UNKNOWN: the
replica may be busy, so the caller treats it as busy until its timeout, as LLMKube's
fail-closed check does.

A pod whose runtime container is not running, or has not passed its startup probe (the
model is still loading), serves nothing that a restart could drop: it is not asked.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

import aiohttp

from objtypes import Obj
from reconcilers.inferenceservice.workload import CONTAINER
from runtimes.idle import UNKNOWN, IdleSignal, Reading, read_answer

PROBE_TIMEOUT = 2.0
MAX_ANSWER = 8 << 20  # a vLLM /metrics page is a few hundred kB


@dataclass(frozen=True)
class Replica:
    pod: str
    address: str  # the pod's IP
    port: int | None  # None: the pod's runtime container names no `http` port


def _container_status(pod: Obj) -> Obj:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if isinstance(status, dict) and status.get("name") == CONTAINER:
            return status
    return {}


def serving(pod: Obj) -> bool:
    """The runtime container runs and passed its startup probe, and the pod has an IP."""
    status = _container_status(pod)
    return (
        "running" in (status.get("state") or {})
        and status.get("started") is True
        and bool((pod.get("status") or {}).get("podIP"))
    )


def _http_port(pod: Obj) -> int | None:
    for container in (pod.get("spec") or {}).get("containers") or []:
        if container.get("name") != CONTAINER:
            continue
        for port in container.get("ports") or []:
            if port.get("name") == "http" and isinstance(port.get("containerPort"), int):
                port_number: int = port["containerPort"]
                return port_number
    return None


def replica_of(pod: Obj) -> Replica:
    address = (pod.get("status") or {}).get("podIP")
    return Replica(pod["metadata"]["name"], str(address or ""), _http_port(pod))


def replicas(pods: Iterable[Obj]) -> list[Replica]:
    """The pods that serve, as replicas to ask."""
    return [replica_of(p) for p in pods if serving(p)]


def _url(replica: Replica, path: str) -> str | None:
    try:
        address = ipaddress.ip_address(replica.address)
    except ValueError:
        return None  # status.podIP is an IP; anything else is not asked
    host = f"[{address}]" if address.version == 6 else str(address)
    return f"http://{host}:{replica.port}{path}"


async def _read(response: aiohttp.ClientResponse) -> bytes | None:
    """The body, or None when it is over MAX_ANSWER bytes."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(64 << 10):
        size += len(chunk)
        if size > MAX_ANSWER:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


async def _ask(session: aiohttp.ClientSession, replica: Replica, signal: IdleSignal) -> Reading:
    if replica.port is None:
        return Reading(UNKNOWN, f"its {CONTAINER} container names no http port")
    if not replica.address:
        return Reading(UNKNOWN, "the pod has no IP")
    url = _url(replica, signal.path)
    if url is None:
        return Reading(UNKNOWN, f"podIP {replica.address!r} is not an IP address")
    try:
        async with session.get(url, allow_redirects=False) as response:
            body = await _read(response)
            status = response.status
    except (aiohttp.ClientError, OSError, TimeoutError) as e:
        return Reading(UNKNOWN, f"GET {signal.path}: {type(e).__name__} {e}".rstrip())
    if body is None:
        return Reading(UNKNOWN, f"{signal.path} answered more than {MAX_ANSWER} bytes")
    return read_answer(signal, status, body)


async def probe(
    targets: list[Replica], signal: IdleSignal, timeout: float = PROBE_TIMEOUT
) -> dict[str, Reading]:
    """Each replica's reading, by pod name; all asked at once, each within `timeout`."""
    if not targets:
        return {}
    client_timeout = aiohttp.ClientTimeout(total=timeout)
    async with aiohttp.ClientSession(timeout=client_timeout, trust_env=False) as session:
        readings = await asyncio.gather(*(_ask(session, r, signal) for r in targets))
    return {r.pod: reading for r, reading in zip(targets, readings, strict=True)}
