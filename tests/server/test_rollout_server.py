"""rolloutPolicy.waitForIdle and maxPodLifetimeIdleTimeoutSeconds on the test server's
simulated cluster (tests/dra_cluster.py), with the controller's real probe.

The simulated pods run nothing, so each test gives a pod what a kubelet would: a
podIP on the loopback (127.0.0.N, one per pod) and a running, started runtime container.
Behind each address is either a loopback stand-in for the runtime's idle signal (Stub:
a /metrics page with vLLM's running gauge, not a vLLM) or the real llama-server
(tests/support/llama_server.py). The simulated Deployment controller replaces a
Deployment's pods as soon as its template changes (Recreate), so a held template is
one whose pods stay. Timeouts are crossed by moving the controller's wall clock
(controller.clock.wall), not by waiting.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from api import conditions as c
from app.manifests import apply_text
from controller import clock
from controller.kube import KubeClient
from controller.resources import DEPLOYMENT, EVENT, INFERENCE_SERVICE, POD
from devcluster.tiny_gguf import write_tiny_gguf
from objtypes import Obj
from reconcilers.inferenceservice.rollout import RUNTIME_ANNOTATION, TEMPLATE_ANNOTATION
from tests.support.dra_cluster import dra_cluster
from tests.support.llama_server import build_llama_server, free_port, running_llama_server
from tests.support.manifests import isvc_yaml, reapply
from tests.support.waiting import condition, eventually, wait_condition

pytestmark = pytest.mark.timeout(300)

CPU_MODEL = """
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {name: m}
spec: {source: Qwen/Qwen3-8B, format: safetensors}
"""
GGUF_MODEL = """
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {name: g}
spec: {source: "https://example.com/tiny.gguf", format: gguf}
"""
GAUGE = "vllm:num_requests_running"
WAIT = 20.0  # s: a held rollout is looked at again every 5 s


class Stub:
    """A stand-in for one vLLM replica's /metrics: `running` requests in flight."""

    def __init__(self) -> None:
        self.running = 0
        self.gauge = True  # False: the page has no running gauge (vLLM --disable-log-stats)
        self.asked = 0

    async def metrics(self, request: web.Request) -> web.Response:
        self.asked += 1
        lines = ["# TYPE vllm:num_requests_running gauge"]
        if self.gauge:
            lines.append(f'{GAUGE}{{engine="0",model_name="m"}} {self.running}.0')
        return web.Response(text="\n".join(lines) + "\n")


@asynccontextmanager
async def stubs(count: int, port: int) -> AsyncIterator[list[tuple[str, Stub]]]:
    """count stubs on 127.0.0.2.. at port: (address, stub)."""
    runners, found = [], []
    try:
        for i in range(count):
            stub, app = Stub(), web.Application()
            app.router.add_get("/metrics", stub.metrics)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            runners.append(runner)
            address = f"127.0.0.{i + 2}"
            await web.TCPSite(runner, address, port).start()
            found.append((address, stub))
        yield found
    finally:
        for runner in runners:
            await runner.cleanup()


def selector(name: str) -> str:
    return f"inference.llmkube.dev/inferenceservice={name}"


async def running_pods(kube: KubeClient, name: str, count: int) -> list[Obj]:
    async def probe() -> list[Obj] | None:
        pods, _ = await kube.list(POD, "default", label_selector=selector(name))
        up = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
        return sorted(up, key=lambda p: p["metadata"]["name"]) if len(up) == count else None

    return await eventually(probe, timeout=WAIT, what=f"{count} pod(s) of {name} running")


async def serve_at(kube: KubeClient, pod: Obj, address: str) -> None:
    """What a kubelet reports of a pod whose runtime serves: its IP, the container running."""
    started = {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    status = {
        "podIP": address,
        "podIPs": [{"ip": address}],
        "containerStatuses": [
            {
                "name": "inference",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": started,
            }
        ],
    }
    await kube.patch(
        POD, "default", pod["metadata"]["name"], {"status": status}, subresource="status"
    )


def env_names(dep: Obj) -> list[str]:
    return [e["name"] for e in dep["spec"]["template"]["spec"]["containers"][0].get("env") or []]


async def deferred(kube: KubeClient, name: str, status: str, reason: str) -> Obj:
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, name, c.ROLLOUT_DEFERRED, status, reason, timeout=WAIT
    )
    found = condition(isvc, c.ROLLOUT_DEFERRED)
    assert found is not None
    return found


async def events(kube: KubeClient, name: str, reason: str, saying: str = "") -> list[Obj]:
    """The service's Events of this reason (once there is one whose message says `saying`)."""

    async def probe() -> list[Obj] | None:
        items, _ = await kube.list(EVENT, "default")
        found = [e for e in items if e["involvedObject"]["name"] == name and e["reason"] == reason]
        return found if any(saying in e["message"] for e in found) else None

    return await eventually(probe, timeout=WAIT, what=f"a {reason} Event of {name}")


def service(name: str, port: int, replicas: int, extra: str = "") -> str:
    spec = f"  replicas: {replicas}\n  containerPort: {port}\n{extra}"
    return isvc_yaml(name, "m", "vllm", spec)


POLICY = "  rolloutPolicy: {waitForIdle: true}\n"
ENV = "  env: [{name: NEW_SETTING, value: '1'}]\n"


@pytest.mark.server
async def test_a_template_change_waits_for_every_replica_then_goes() -> None:
    port = free_port()
    async with dra_cluster(gpus=0, plugin=0) as (kube, _m, _s), stubs(2, port) as found:
        (ip_a, a), (ip_b, b) = found
        await apply_text(kube, CPU_MODEL)
        await apply_text(kube, service("s", port, 2, POLICY))
        first = await running_pods(kube, "s", 2)
        for pod, address in zip(first, (ip_a, ip_b), strict=True):
            await serve_at(kube, pod, address)
        await deferred(kube, "s", "False", c.NO_ROLLOUT_PENDING)
        a.running = 1
        # A new env var changes the pod template: held while replica a serves a request.
        await reapply(kube, service("s", port, 2, POLICY + ENV))
        held = await deferred(kube, "s", "True", c.PODS_BUSY)
        pod_a = first[0]["metadata"]["name"]
        assert f"busy: {pod_a} ({GAUGE} 1)" in held["message"]
        assert "at most 300s more (idleTimeoutSeconds 300)" in held["message"]
        assert first[1]["metadata"]["name"] not in held["message"]
        assert a.asked and b.asked  # each replica is asked, at its own address
        dep = await kube.get(DEPLOYMENT, "default", "s")
        assert dep is not None and env_names(dep) == []
        # Held means the template only: a new replica count is applied at once, its new
        # pod made from the template the others run.
        await reapply(kube, service("s", port, 3, POLICY + ENV))
        three = await running_pods(kube, "s", 3)
        assert {p["metadata"]["name"] for p in first} < {p["metadata"]["name"] for p in three}
        dep = await kube.get(DEPLOYMENT, "default", "s")
        assert dep is not None and dep["spec"]["replicas"] == 3 and env_names(dep) == []
        still = await deferred(kube, "s", "True", c.PODS_BUSY)
        assert f"busy: {pod_a} ({GAUGE} 1)" in still["message"]
        (busy_event,) = await events(kube, "s", c.PODS_BUSY)
        assert busy_event["type"] == "Normal"

        a.running = 0  # the request ended: every replica idle, the change goes
        went = await deferred(kube, "s", "False", c.REPLICAS_IDLE)
        assert went["message"] == (
            "every serving replica (2) is idle: the pod-template change is applied"
        )
        dep = await kube.get(DEPLOYMENT, "default", "s")
        assert dep is not None and env_names(dep) == ["NEW_SETTING"]
        replaced = await running_pods(kube, "s", 3)
        assert not {p["metadata"]["name"] for p in three} & {
            p["metadata"]["name"] for p in replaced
        }
        (idle_event,) = await events(kube, "s", c.REPLICAS_IDLE)
        assert idle_event["type"] == "Normal"


def record(dep: Obj | None) -> str | None:
    """The Deployment's record of the pod template we applied, if it has one."""
    assert dep is not None
    annotations: dict[str, str] = dep["metadata"].get("annotations") or {}
    return annotations.get(TEMPLATE_ANNOTATION)


@pytest.mark.server
async def test_the_template_is_recorded_while_the_policy_is_set() -> None:
    port = free_port()
    async with dra_cluster(gpus=0, plugin=0) as (kube, _m, _s), stubs(1, port) as found:
        ((address, stub),) = found
        await apply_text(kube, CPU_MODEL)
        await apply_text(kube, service("s", port, 1))
        (pod,) = await running_pods(kube, "s", 1)
        dep = await kube.get(DEPLOYMENT, "default", "s")
        assert record(dep) is None
        assert dep is not None and dep["metadata"]["annotations"][RUNTIME_ANNOTATION] == "vllm"

        # The policy turned on records the template the pod runs, without a restart.
        await reapply(kube, service("s", port, 1, POLICY))

        async def recorded() -> Obj | None:
            dep = await kube.get(DEPLOYMENT, "default", "s")
            return dep if record(dep) else None

        await eventually(recorded, timeout=WAIT, what="the template recorded")
        (same,) = await running_pods(kube, "s", 1)
        assert same["metadata"]["name"] == pod["metadata"]["name"]

        # So the next template change is held while the replica is busy.
        await serve_at(kube, pod, address)
        stub.running = 1
        await reapply(kube, service("s", port, 1, POLICY + ENV))
        await deferred(kube, "s", "True", c.PODS_BUSY)
        dep = await kube.get(DEPLOYMENT, "default", "s")
        assert dep is not None and env_names(dep) == [] and record(dep)

        # The policy taken off: the change goes, and the record is taken off with it.
        await reapply(kube, service("s", port, 1, ENV))

        async def went() -> Obj | None:
            dep = await kube.get(DEPLOYMENT, "default", "s")
            return dep if dep is not None and env_names(dep) == ["NEW_SETTING"] else None

        assert record(await eventually(went, timeout=WAIT, what="the change applied")) is None


@pytest.mark.server
async def test_the_timeout_lets_a_busy_rollout_go_with_a_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = free_port()
    policy = "  rolloutPolicy: {waitForIdle: true, idleTimeoutSeconds: 600}\n"
    async with dra_cluster(gpus=0, plugin=0) as (kube, _m, _s), stubs(1, port) as found:
        ((address, stub),) = found
        await apply_text(kube, CPU_MODEL)
        await apply_text(kube, service("s", port, 1, policy))
        (pod,) = await running_pods(kube, "s", 1)
        await serve_at(kube, pod, address)
        stub.running = 2
        await reapply(kube, service("s", port, 1, policy + ENV))
        held = await deferred(kube, "s", "True", c.PODS_BUSY)
        assert "at most 600s more" in held["message"]
        # Ten minutes later by the controller's clock, the replica still busy.
        real = time.time
        monkeypatch.setattr(clock, "wall", lambda: real() + 601)
        went = await deferred(kube, "s", "False", c.IDLE_TIMEOUT_EXCEEDED)
        name = pod["metadata"]["name"]
        assert went["message"] == (
            "rolloutPolicy.idleTimeoutSeconds (600s) passed with replicas not idle (busy: "
            f"{name} ({GAUGE} 2)): the pod-template change is applied"
        )
        dep = await kube.get(DEPLOYMENT, "default", "s")
        assert dep is not None and env_names(dep) == ["NEW_SETTING"]
        (warning,) = await events(kube, "s", c.IDLE_TIMEOUT_EXCEEDED)
        assert warning["type"] == "Warning" and name in warning["message"]


@pytest.mark.server
async def test_force_and_an_unreadable_or_missing_signal() -> None:
    port = free_port()
    async with dra_cluster(gpus=0, plugin=0) as (kube, _m, _s), stubs(1, port) as found:
        ((address, stub),) = found
        await apply_text(kube, CPU_MODEL)
        await apply_text(kube, service("s", port, 1, POLICY))
        (pod,) = await running_pods(kube, "s", 1)
        name = pod["metadata"]["name"]
        # Nothing answers at the pod's address: it may be busy, so the change is held.
        await serve_at(kube, pod, "127.0.0.99")
        await reapply(kube, service("s", port, 1, POLICY + ENV))
        held = await deferred(kube, "s", "True", c.IDLE_CHECK_FAILED)
        assert f"cannot tell: {name} (GET /metrics: ClientConnectorError" in held["message"]
        (warning,) = await events(kube, "s", c.IDLE_CHECK_FAILED)
        assert warning["type"] == "Warning"
        dep = await kube.get(DEPLOYMENT, "default", "s")
        assert dep is not None and env_names(dep) == []
        # force: the held change goes at once.
        forced = "  rolloutPolicy: {waitForIdle: true, force: true}\n"
        await reapply(kube, service("s", port, 1, forced + ENV))
        went = await deferred(kube, "s", "False", c.FORCED)
        assert went["message"].startswith("rolloutPolicy.force")
        dep = await kube.get(DEPLOYMENT, "default", "s")
        assert dep is not None and env_names(dep) == ["NEW_SETTING"]

        # A replica with no running gauge (vLLM --disable-log-stats) has no idle detection:
        # the next change goes, and says why.
        (pod,) = await running_pods(kube, "s", 1)
        await serve_at(kube, pod, address)
        stub.gauge = False
        await reapply(kube, service("s", port, 1, POLICY))
        went = await deferred(kube, "s", "False", c.IDLE_CHECK_UNSUPPORTED)
        assert went["message"] == (
            f"no idle signal from {pod['metadata']['name']} (/metrics has no {GAUGE} (no "
            "request has run yet, or its metrics are off)): the pod-template change is "
            "applied without waiting for them"
        )
        dep = await kube.get(DEPLOYMENT, "default", "s")
        assert dep is not None and env_names(dep) == []


@pytest.fixture(scope="module")
def llama_server() -> Path:
    return build_llama_server()


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


@pytest.mark.server
async def test_a_llamacpp_rollout_waits_for_the_real_llama_servers_request(
    llama_server: Path, tiny_gguf: Path
) -> None:
    """The pod's runtime is the real llama-server; a completion streams through it."""
    args = ("--parallel", "2", "--ctx-size", "512", "--context-shift")
    async with (
        running_llama_server(llama_server, tiny_gguf, *args) as server,
        dra_cluster(gpus=0, plugin=0) as (kube, _m, _s),
    ):
        spec = f"  containerPort: {server.port}\n{POLICY}"
        await apply_text(kube, GGUF_MODEL)
        await apply_text(kube, isvc_yaml("chat", "g", "llamacpp", spec))
        (pod,) = await running_pods(kube, "chat", 1)
        await serve_at(kube, pod, server.host)
        await deferred(kube, "chat", "False", c.NO_ROLLOUT_PENDING)
        body = {"prompt": "hello", "n_predict": 1_000_000, "ignore_eos": True, "stream": True}
        async with (
            aiohttp.ClientSession() as session,
            session.post(f"{server.url}/completion", json=body) as stream,
        ):
            await stream.content.readline()  # generating
            await reapply(kube, isvc_yaml("chat", "g", "llamacpp", spec + ENV))
            held = await deferred(kube, "chat", "True", c.PODS_BUSY)
            name = pod["metadata"]["name"]
            assert f"busy: {name} (1 of 2 slot(s) processing)" in held["message"]
            dep = await kube.get(DEPLOYMENT, "default", "chat")
            assert dep is not None and env_names(dep) == []
            pods, _ = await kube.list(POD, "default", label_selector=selector("chat"))
            assert [p["metadata"]["name"] for p in pods] == [name]
        # The client went away: the slot is idle, the change goes.
        await deferred(kube, "chat", "False", c.REPLICAS_IDLE)
        dep = await kube.get(DEPLOYMENT, "default", "chat")
        assert dep is not None and env_names(dep) == ["NEW_SETTING"]


def lifetime(seconds: int, idle_timeout: int | None = None) -> str:
    extra = f"  maxPodLifetimeSeconds: {seconds}\n{POLICY}"
    if idle_timeout is not None:
        extra += f"  maxPodLifetimeIdleTimeoutSeconds: {idle_timeout}\n"
    return extra


async def recycled(kube: KubeClient, name: str, pod: str) -> Obj:
    async def probe() -> Obj | None:
        items, _ = await kube.list(EVENT, "default")
        found = [e for e in items if e["reason"] == "PodRecycled" and pod in e["message"]]
        return found[0] if found else None

    event: Obj = await eventually(probe, timeout=WAIT, what=f"the PodRecycled Event of {pod}")
    assert event["involvedObject"]["name"] == name
    return event


@pytest.mark.server
async def test_an_expired_pod_is_recycled_once_idle_or_past_the_idle_timeout() -> None:
    port = free_port()
    async with dra_cluster(gpus=0, plugin=0) as (kube, _m, _s), stubs(2, port) as found:
        (ip_a, a), (ip_b, b) = found
        await apply_text(kube, CPU_MODEL)
        await apply_text(kube, service("s", port, 1, lifetime(3600)))
        (pod,) = await running_pods(kube, "s", 1)
        name = pod["metadata"]["name"]
        await serve_at(kube, pod, ip_a)
        a.running = 1
        # Its lifetime shortened: expired, but busy, so it waits (as long as it takes).
        await reapply(kube, service("s", port, 1, lifetime(1)))
        (deferred_event,) = await events(kube, "s", "PodRecycleDeferred")
        assert deferred_event["type"] == "Normal"
        assert deferred_event["message"] == (
            f"Pod {name} is past maxPodLifetimeSeconds and not idle ({GAUGE} 1); "
            "rolloutPolicy.waitForIdle: its eviction waits as long as it takes "
            "(maxPodLifetimeIdleTimeoutSeconds is not set)"
        )
        asked = a.asked
        await eventually(lambda: _more(a, asked), timeout=WAIT, what="the pod asked again")
        assert await kube.get(POD, "default", name) is not None
        a.running = 0
        event = await recycled(kube, "s", name)
        assert event["message"] == (
            f"Evicted pod {name} after maxPodLifetimeSeconds (it was idle); the Deployment "
            "replaces it"
        )

        # The next pod: busy, and maxPodLifetimeIdleTimeoutSeconds bounds the wait.
        await reapply(kube, service("s", port, 1, lifetime(3600, 600)))
        (pod,) = await running_pods(kube, "s", 1)
        name = pod["metadata"]["name"]
        await serve_at(kube, pod, ip_b)
        b.running = 3
        await reapply(kube, service("s", port, 1, lifetime(1, 600)))
        saying = f"Pod {name} is past maxPodLifetimeSeconds"
        (later,) = [
            e
            for e in await events(kube, "s", "PodRecycleDeferred", saying)
            if saying in e["message"]
        ]
        assert later["message"].endswith(
            "its eviction waits at most 600s past its lifetime (maxPodLifetimeIdleTimeoutSeconds)"
        )
        assert await kube.get(POD, "default", name) is not None
        await reapply(kube, service("s", port, 1, lifetime(1, 0)))
        event = await recycled(kube, "s", name)
        assert event["message"] == (
            f"Evicted pod {name} after maxPodLifetimeSeconds and 0s of "
            f"maxPodLifetimeIdleTimeoutSeconds, still not idle ({GAUGE} 3); the Deployment "
            "replaces it"
        )


async def _more(stub: Stub, than: int) -> bool:
    return stub.asked > than
