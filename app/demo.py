"""The local demo: the seed guide's examples on a simulated DRA-only cluster.

Starts the bundled test API server with a simulated cluster whose nodes advertise
no nvidia.com/gpu, only 6 GPUs reachable through DRA claims; installs the CRDs;
applies examples/single-gpu.yaml and examples/multi-gpu.yaml, the multi-GPU example
once more without `count` (sized from its two-gpus template), and one Model that
breaks a rule; runs the controller; and prints what it built and what DRA allocated.

The test API server is not part of the product wheel: it is the separate distribution
`llmkube-py-testserver` (built from testserver/, installed by `make install`, or
`pip install 'llmkube-py[demo]'`).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import sys
import time
from collections.abc import Callable

from prometheus_client import generate_latest

from controller.errors import ApiError
from controller.kube import KubeClient
from controller.manager import Manager, ManagerConfig
from controller.resources import DEPLOYMENT, INFERENCE_SERVICE, MODEL, POD, RESOURCE_CLAIM
from objtypes import Obj
from reconcilers.settings import CacheSettings, Settings

from .controllers import reconcilers
from .kubectl import render_status
from .manifests import EXAMPLES, apply_text, install_crds
from .servers import bind_domain_metrics

INVALID_MODEL = """
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {name: claims-and-resource-name}
spec:
  source: Qwen/Qwen3-8B
  hardware:
    accelerator: cuda
    gpu:
      enabled: true
      count: 1
      resourceName: nvidia.com/gpu
      resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
"""


FROM_CLAIMS = "qwen3-32b-from-claims"
# Model delivery: a downloaded GGUF the loader stages once in the shared cache PVC. The
# simulated loader takes 2 s (pod annotation), so the Model is seen Downloading.
DELIVERY = """
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {name: tinyllama}
spec:
  source: https://huggingface.co/TheBloke/TinyLlama-1.1B-Chat-v1.0-GGUF/resolve/main/tinyllama-1.1b-chat-v1.0.Q4_K_M.gguf
---
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata: {name: tinyllama}
spec:
  modelRef: tinyllama
  runtime: llamacpp
  replicas: 2
  podAnnotations: {"sim.llmkube.dev/loader-seconds": "2"}
"""


def _without_count(text: str) -> str:
    """The multi-GPU example renamed, its Model's count removed (the template's stays)."""
    text = re.sub(r"^      count: \d+\n", "", text, flags=re.M)
    return text.replace("qwen3-32b", FROM_CLAIMS)


def _conditions(obj: Obj | None) -> str:
    conds = ((obj or {}).get("status") or {}).get("conditions") or []
    return "\n".join(
        f"      {c['type']}={c['status']} ({c['reason']}): {c['message']}" for c in conds
    )


async def _wait_all(
    client: KubeClient, names: list[str], timeout: float, done: Callable[[Obj], bool]
) -> bool:
    """Until done(status) holds for every named service, or the timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        statuses = [
            ((await client.get(INFERENCE_SERVICE, "default", name)) or {}).get("status") or {}
            for name in names
        ]
        if all(done(status) for status in statuses):
            return True
        await asyncio.sleep(0.1)
    return False


def _ready(status: Obj) -> bool:
    return bool(status.get("phase") == "Ready")


def _allocated(status: Obj) -> bool:
    """Every expected device of the service allocated."""
    alloc = status.get("allocation") or {}
    return bool(alloc) and alloc.get("allocatedDevices") == alloc.get("expectedDevices")


async def _report(client: KubeClient, manager: Manager, names: list[str]) -> None:
    for name in names:
        isvc = await client.get(INFERENCE_SERVICE, "default", name)
        dep = await client.get(DEPLOYMENT, "default", name) or {}
        pod_spec = dep.get("spec", {}).get("template", {}).get("spec", {})
        container = (pod_spec.get("containers") or [{}])[0]
        print(f"\nInferenceService {name}  phase={(isvc or {}).get('status', {}).get('phase')}")
        print(f"  pod resourceClaims:       {json.dumps(pod_spec.get('resourceClaims'))}")
        resources = container.get("resources", {})
        print(f"  container claims:         {json.dumps(resources.get('claims'))}")
        print(f"  container limits:         {json.dumps(resources.get('limits', {}))}")
        print(f"  runtime image:            {container.get('image')}")
        print(f"  runtime args:             {' '.join(container.get('args', []))}")
        status = (isvc or {}).get("status") or {}
        label = f"endpoint ({status.get('mode')}):"
        print(f"  {label:<26}{status.get('endpoint')}")
        allocation = status.get("allocation") or {}
        print(f"  devices allocated:        {allocation.get('summary', '-')}")
        for pod in allocation.get("pods") or []:
            devices = ", ".join(
                f"{d['driver']}/{d['pool']}/{d['device']}" for d in pod.get("devices") or []
            )
            print(f"    {pod['name']}: {devices or 'none yet'}")
        print("  conditions:")
        print(_conditions(isvc))
    pods, _ = await client.list(POD, "default")
    claims, _ = await client.list(RESOURCE_CLAIM, "default")
    print("\nPods on the simulated DRA-only cluster:")
    for pod in pods:
        print(f"  {pod['metadata']['name']:<40} {pod.get('status', {}).get('phase')}")
    print("ResourceClaims made from the templates and allocated:")
    for claim in claims:
        devices = claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results")
        print(f"  {claim['metadata']['name']:<40} devices={len(devices or [])}")
    print(f"\nMetrics: http://127.0.0.1:{manager.http_port}/metrics  (excerpt)")
    for line in generate_latest(manager.metrics.registry).decode().splitlines():
        if line.startswith(
            (
                "controller_runtime_reconcile_total",
                "workqueue_adds_total",
                "llmkube_inferenceservice_phase",
                "llmkube_inferenceservice_devices",
            )
        ):
            print(f"  {line}")


async def _delivery(client: KubeClient, timeout: float = 30) -> bool:
    """The Model's phases as they change, then what each replica's loader reported."""
    await apply_text(client, DELIVERY)
    print("\napplied Model tinyllama (https GGUF) and InferenceService tinyllama (2 replicas)")
    phases: list[str] = []
    deadline = time.monotonic() + timeout
    model: Obj = {}
    while time.monotonic() < deadline and (not phases or phases[-1] not in ("Ready", "Failed")):
        model = await client.get(MODEL, "default", "tinyllama") or {}
        phase = (model.get("status") or {}).get("phase")
        if phase and (not phases or phases[-1] != phase):
            phases.append(phase)
            print(f"  Model tinyllama phase: {phase}")
        await asyncio.sleep(0.05)
    status = model.get("status") or {}
    for key in ("cacheKey", "path", "size", "sha256", "stagedFiles"):
        print(f"  status.{key}: {status.get(key)}")
    pods, _ = await client.list(POD, "default")
    downloads = []
    for pod in pods:
        if pod["metadata"]["labels"].get("inference.llmkube.dev/inferenceservice") != "tinyllama":
            continue
        for s in (pod.get("status") or {}).get("initContainerStatuses") or []:
            term = (s.get("state") or {}).get("terminated") or {}
            if term:
                report = json.loads(term.get("message") or "{}")
                downloads.append(len(report.get("downloaded") or []))
                how = "downloaded it" if report.get("downloaded") else "reused the cached file"
                print(f"  pod {pod['metadata']['name']}: model-loader {how}")
    volume = ""
    dep = await client.get(DEPLOYMENT, "default", "tinyllama") or {}
    for v in dep.get("spec", {}).get("template", {}).get("spec", {}).get("volumes") or []:
        if v.get("name") == "model-cache":
            volume = v["persistentVolumeClaim"]["claimName"]
    print(f"  both replicas mount PVC {volume or '-'} read-only at /models")
    return "Downloading" in phases and phases[-1] == "Ready" and sorted(downloads) == [0, 1]


MISSING_TESTSERVER = """\
The demo runs against the bundled test API server, which is not installed.
Install it with:  pip install 'llmkube-py[demo]'   (or: pip install llmkube-py-testserver)"""


class ApiServer:
    """The test API server as a child process: a program we run, not a module we import
    (it depends on the product, never the reverse)."""

    def __init__(self, proc: asyncio.subprocess.Process, url: str) -> None:
        self.proc = proc
        self.url = url

    @classmethod
    async def start(cls, *args: str) -> ApiServer:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "testserver",
            "--port",
            "0",
            *args,
            stdout=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode().strip()
        if not line.startswith("LISTENING "):
            proc.kill()
            raise RuntimeError(f"test API server did not start: {line!r}")
        return cls(proc, line.split(" ", 1)[1])

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


async def demo(keep_running: bool = False) -> int:
    if importlib.util.find_spec("testserver") is None:
        print(MISSING_TESTSERVER, file=sys.stderr)
        return 2
    server = await ApiServer.start("--simulate-cluster", "dra=6,plugin=0")
    print(f"Test API server with a simulated DRA-only cluster (6 GPUs) at {server.url}")
    client = await KubeClient.connect(server.url)
    config = ManagerConfig(http_host="127.0.0.1", http_port=0, workers=2)
    cache = CacheSettings(enabled=True)  # the chart's default: the shared cache PVC
    manager = Manager(client, config, reconcilers=reconcilers(Settings(model_cache=cache)))
    bind_domain_metrics(manager)
    try:
        await install_crds(client)
        await manager.start()
        await manager.wait_synced()
        for example in ("single-gpu.yaml", "multi-gpu.yaml"):
            await apply_text(client, (EXAMPLES / example).read_text())
            print(f"applied examples/{example}")
        await apply_text(client, _without_count((EXAMPLES / "multi-gpu.yaml").read_text()))
        print(f"applied examples/multi-gpu.yaml without count, as {FROM_CLAIMS}")
        try:  # the CRD's CEL rule rejects it at the API server, as a real cluster does
            await apply_text(client, INVALID_MODEL)
            print("Model claims-and-resource-name was ADMITTED (it breaks a rule)")
            ok_rejected = False
        except ApiError as e:
            print(f"Model claims-and-resource-name (breaks a rule) rejected: {e.message}")
            ok_rejected = True
        names = ["qwen3-embedding", "qwen3-32b", FROM_CLAIMS]
        ok = await _wait_all(client, names, 30, _ready) and ok_rejected
        await manager.wait_idle()
        ok = ok and await _wait_all(client, names, 10, _allocated)
        await _report(client, manager, names)
        for name in (names[1], FROM_CLAIMS):
            print(f"\n$ kubectl llmkube status {name}")
            print(await render_status(client, "default", name))
        delivered = await _delivery(client)
        ok = ok and delivered
        print(
            "\nDemo",
            "succeeded: all three services serve on DRA claims; the Model went Downloading -> "
            "Ready and the second replica reused the cached file."
            if ok
            else "FAILED.",
        )
        if keep_running:
            print(f"Still running (Ctrl-C stops); try:\n  kubectl --server {server.url} get pods")
            print(f"  kubectl llmkube status {names[1]} --server {server.url}")
            await asyncio.Event().wait()
        return 0 if ok else 1
    finally:
        await manager.stop()
        await client.close()
        await server.stop()
