"""The local demo: the seed guide's examples on a DRA-only cluster.

Starts an API server (a `Site`: where the demo runs), installs the CRDs; applies a GPU
Model without claims (served through a ResourceClaimTemplate the controller makes), two
services sharing one GPU through DRA (gpuSharing shared, 40Gi each of the one 80Gi device
that allows multiple allocations; allocated before the whole-GPU services come, which
could take that device otherwise), examples/single-gpu.yaml and examples/multi-gpu.yaml,
the multi-GPU example once more without `count` (sized from its two-gpus template), one
Model that breaks a rule, and a downloaded GGUF served by two
replicas; runs the controller in this process; and prints what it built and what DRA
allocated. The steps and the report are the same on both sites:

- `llmkube-controller demo` (`make demo`): the bundled test API server with a simulated
  cluster whose nodes advertise no nvidia.com/gpu, only 6 GPUs reachable through DRA
  claims and one more that allows multiple allocations, and a simulated kubelet that
  runs the model loader. The test API server is not part of the product wheel: it is the
  separate distribution `llmkube-py-testserver` (built from testserver/, installed by
  `make install`, or `pip install 'llmkube-py[demo]'`).
- `llmkube-controller demo --cluster` (`make demo-cluster`): the real control plane of
  devcluster/ (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and a
  fake DRA driver: 2 nodes x 4 GPUs, no nvidia.com/gpu either; `--sharing`: gpu-3 of the
  first node shareable, the others also as MIG partitions), started as the program
  `python -m devcluster` from the source checkout (it is not in the wheel). The real
  resourceclaim controller makes the claims and the real scheduler allocates them. kwok
  runs no containers: it reports every init container Completed with no termination
  message, so no loader report reaches the downloaded Model, which stays Pending while
  its replicas are Ready; and the cluster has no volume provisioner, so the demo binds a
  PersistentVolume to the model cache claim ahead.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import generate_latest

from controller.errors import ApiError
from controller.kube import KubeClient
from controller.manager import Manager, ManagerConfig
from controller.resources import (
    DEPLOYMENT,
    GPU_QUOTA,
    INFERENCE_SERVICE,
    MODEL,
    PERSISTENT_VOLUME_CLAIM,
    POD,
    RESOURCE_CLAIM,
    ResourceType,
)
from objtypes import Obj
from reconcilers.settings import CacheSettings, Settings
from reconcilers.sources.cache_claim import SHARED_CLAIM
from reconcilers.sources.loader import LOADER_NAME

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
# A GPU Model that names no claims: on a DRA-only cluster the controller makes the
# ResourceClaimTemplate (reconcilers/devices/managed.py).
MANAGED = "qwen3-8b-managed"
MANAGED_CLAIMS = f"""
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {{name: {MANAGED}}}
spec:
  source: Qwen/Qwen3-8B
  format: safetensors
  hardware:
    accelerator: cuda
    gpu: {{enabled: true, vendor: nvidia, count: 1}}
---
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata: {{name: {MANAGED}}}
spec: {{modelRef: {MANAGED}, runtime: vllm}}
"""
# Two services sharing one GPU through DRA, on the managed Model above: each a 40Gi share
# of an 80Gi device that allows multiple allocations (KEP-5075), on templates the
# controller makes from gpuSharing.
SHARED = ("qwen3-8b-shared-a", "qwen3-8b-shared-b")
SHARED_SERVICES = "".join(
    f"""---
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata: {{name: {name}}}
spec:
  modelRef: {MANAGED}
  runtime: vllm
  resources: {{gpuSharing: {{mode: shared, memoryLimitGiB: 40}}}}
"""
    for name in SHARED
)
# Model delivery: a downloaded GGUF the loader stages once in the shared cache PVC.
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
"""
# The simulated loader takes 2 s (a pod annotation only the simulated kubelet reads), so
# the Model is seen Downloading.
SIMULATED_LOADER = '  podAnnotations: {"sim.llmkube.dev/loader-seconds": "2"}\n'
# The control plane has no volume provisioner (nothing is ever mounted: kwok runs no
# containers), so a PersistentVolume is bound ahead to the namespace's cache claim.
PERSISTENT_VOLUME = ResourceType("", "v1", "persistentvolumes", "PersistentVolume", False)
NAMESPACE = "default"
CACHE_CLAIM = SHARED_CLAIM  # the namespace's shared cache claim, llmkube-model-cache
CLUSTER_NODES, CLUSTER_GPUS = 2, 4
# Starting the control plane on a busy 2-core machine (each component may take 120 s).
CLUSTER_START_TIMEOUT = 600.0


@dataclass
class Site:
    """Where the demo runs: how to reach its API server, and what its cluster does that
    the demo's checks depend on."""

    name: str  # "the simulated DRA-only cluster"
    banner: str  # printed first: what runs where
    server: str | None  # the API server's URL, or None: the kubeconfig's
    kubeconfig: str | None
    runs_loader: bool  # its kubelet runs the model loader, which reports what it staged
    needs_cache_volume: bool  # no provisioner: a PersistentVolume for the cache claim
    timeout: float  # how long each wait of the demo may take on it
    stop: Callable[[], Awaitable[None]]
    hints: list[str] = field(default_factory=list)  # commands to try with --keep-running


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
            ((await client.get(INFERENCE_SERVICE, NAMESPACE, name)) or {}).get("status") or {}
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


async def _one_device(client: KubeClient, names: tuple[str, ...]) -> bool:
    """Whether the services' pods hold one and the same device (shares of it)."""
    held = set()
    for name in names:
        status = ((await client.get(INFERENCE_SERVICE, NAMESPACE, name)) or {}).get("status")
        for pod in ((status or {}).get("allocation") or {}).get("pods") or []:
            held |= {(d["driver"], d["pool"], d["device"]) for d in pod.get("devices") or []}
    return len(held) == 1


def _pod_ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


async def _served(client: KubeClient, timeout: float) -> None:
    """Until the API server serves our kinds: a real one does once the CRDs are
    Established, a moment after they are created."""
    deadline = time.monotonic() + timeout
    for rt in (MODEL, INFERENCE_SERVICE, GPU_QUOTA):
        while True:
            try:
                await client.list(rt, NAMESPACE)
                break
            except ApiError as e:
                if not e.not_found or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)


async def _cache_volume(client: KubeClient) -> None:
    await client.create(
        PERSISTENT_VOLUME,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"demo-{CACHE_CLAIM}"},
            "spec": {
                "capacity": {"storage": "100Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Delete",
                "hostPath": {"path": "/tmp/llmkube-demo-model-cache"},  # never mounted
                "claimRef": {"namespace": NAMESPACE, "name": CACHE_CLAIM},
            },
        },
    )
    print(f"PersistentVolume demo-{CACHE_CLAIM} bound ahead to the claim {CACHE_CLAIM}")


async def _report(client: KubeClient, manager: Manager, site: Site, names: list[str]) -> None:
    for name in names:
        isvc = await client.get(INFERENCE_SERVICE, NAMESPACE, name)
        dep = await client.get(DEPLOYMENT, NAMESPACE, name) or {}
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
        made = status.get("managedClaims") or {}
        if made:
            print(f"  made for it:              ResourceClaimTemplate {made.get('template')}")
        if made.get("sharing") == "shared":
            print(
                f"  shared:                   {made.get('memory')} of the device's memory, "
                f"runtime fraction {made.get('memoryFraction')}"
            )
        allocation = status.get("allocation") or {}
        print(f"  devices allocated:        {allocation.get('summary', '-')}")
        for pod in allocation.get("pods") or []:
            devices = ", ".join(
                f"{d['driver']}/{d['pool']}/{d['device']}" for d in pod.get("devices") or []
            )
            print(f"    {pod['name']}: {devices or 'none yet'}")
        print("  conditions:")
        print(_conditions(isvc))
    pods, _ = await client.list(POD, NAMESPACE)
    claims, _ = await client.list(RESOURCE_CLAIM, NAMESPACE)
    print(f"\nPods on {site.name}:")
    for pod in pods:
        node = pod.get("spec", {}).get("nodeName") or "-"
        print(f"  {pod['metadata']['name']:<40} {pod.get('status', {}).get('phase')}  node {node}")
    print("ResourceClaims made from the templates and allocated:")
    for claim in claims:
        devices = claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results")
        shares = [
            f"{d['pool']}/{d['device']} {d['consumedCapacity']['memory']}"
            for d in devices or []
            if d.get("consumedCapacity")
        ]
        told = f"  share of {', '.join(shares)}" if shares else ""
        print(f"  {claim['metadata']['name']:<40} devices={len(devices or [])}{told}")
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


async def _tinyllama_pods(client: KubeClient) -> list[Obj]:
    pods, _ = await client.list(POD, NAMESPACE)
    label = "inference.llmkube.dev/inferenceservice"
    return [p for p in pods if p["metadata"].get("labels", {}).get(label) == "tinyllama"]


async def _delivery(client: KubeClient, site: Site) -> tuple[bool, str]:
    """The Model's phases as they change, then what each replica's loader reported; the
    outcome, and what it shows."""
    await apply_text(client, DELIVERY + (SIMULATED_LOADER if site.runs_loader else ""))
    print("\napplied Model tinyllama (https GGUF) and InferenceService tinyllama (2 replicas)")
    phases: list[str] = []
    deadline = time.monotonic() + site.timeout
    model: Obj = {}
    pods: list[Obj] = []
    while time.monotonic() < deadline:
        model = await client.get(MODEL, NAMESPACE, "tinyllama") or {}
        phase = (model.get("status") or {}).get("phase")
        if phase and (not phases or phases[-1] != phase):
            phases.append(phase)
            print(f"  Model tinyllama phase: {phase}")
        pods = await _tinyllama_pods(client)
        if site.runs_loader and phases and phases[-1] in ("Ready", "Failed"):
            break
        if not site.runs_loader and len(pods) == 2 and all(map(_pod_ready, pods)):
            break  # kwok made both Ready: no loader report is coming
        await asyncio.sleep(0.05)
    status = model.get("status") or {}
    for key in ("cacheKey", "path", "size", "sha256", "stagedFiles"):
        print(f"  status.{key}: {status.get(key)}")
    downloads = []
    for pod in pods:
        name = pod["metadata"]["name"]
        for s in (pod.get("status") or {}).get("initContainerStatuses") or []:
            term = (s.get("state") or {}).get("terminated") or {}
            if s.get("name") != LOADER_NAME or not term:
                continue
            if not term.get("message"):
                print(f"  pod {name}: model-loader {term.get('reason')}, no report (nothing ran)")
                continue
            report = json.loads(term["message"])
            downloads.append(len(report.get("downloaded") or []))
            how = "downloaded it" if report.get("downloaded") else "reused the cached file"
            print(f"  pod {name}: model-loader {how}")
    volume = ""
    dep = await client.get(DEPLOYMENT, NAMESPACE, "tinyllama") or {}
    for v in dep.get("spec", {}).get("template", {}).get("spec", {}).get("volumes") or []:
        if v.get("name") == "model-cache":
            volume = v["persistentVolumeClaim"]["claimName"]
    print(f"  both replicas mount PVC {volume or '-'} read-only at /models")
    if site.runs_loader:
        ok = "Downloading" in phases and phases[-1] == "Ready" and sorted(downloads) == [0, 1]
        return (
            ok,
            "the Model went Downloading -> Ready and the second replica reused the cached file",
        )
    claim = await client.get(PERSISTENT_VOLUME_CLAIM, NAMESPACE, volume or CACHE_CLAIM) or {}
    bound = (claim.get("status") or {}).get("phase")
    print(
        f"  PVC {volume or CACHE_CLAIM}: {bound}, volume {claim.get('spec', {}).get('volumeName')}"
    )
    print(f"  Model tinyllama stays {phases[-1] if phases else '-'}:")
    print(_conditions(model))
    ready = len(pods) == 2 and all(map(_pod_ready, pods))
    ok = ready and bound == "Bound" and phases[-1:] == ["Pending"] and downloads == []
    return ok, (
        "tinyllama's two replicas are Ready on kwok nodes and share the bound cache PVC; "
        "kwok runs no loader, so the Model stays Pending"
    )


MISSING_TESTSERVER = """\
The demo runs against the bundled test API server, which is not installed.
Install it with:  pip install 'llmkube-py[demo]'   (or: pip install llmkube-py-testserver)"""

MISSING_DEVCLUSTER = """\
The demo on the real control plane needs a source checkout of llmkube-py: devcluster/
(not in the wheel) and the Kubernetes binaries `make kube-binaries` builds.
From the checkout:  make demo-cluster"""


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
        await _terminate(self.proc, 10)


async def _terminate(proc: asyncio.subprocess.Process, grace: float) -> None:
    if proc.returncode is None:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), grace)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def simulated_site() -> Site | None:
    if importlib.util.find_spec("testserver") is None:
        print(MISSING_TESTSERVER, file=sys.stderr)
        return None
    server = await ApiServer.start("--simulate-cluster", "dra=6,plugin=0,shared=1")
    return Site(
        name="the simulated DRA-only cluster",
        banner=(
            f"Test API server with a simulated DRA-only cluster (6 GPUs, and 1 that allows "
            f"multiple allocations) at {server.url}"
        ),
        server=server.url,
        kubeconfig=None,
        runs_loader=True,
        needs_cache_volume=False,
        timeout=30,
        stop=server.stop,
        hints=[
            f"kubectl --server {server.url} get pods",
            f"kubectl llmkube status qwen3-32b --server {server.url}",
        ],
    )


def source_checkout() -> Path | None:
    """The checkout this module runs from (an editable install), if devcluster/ is there."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "devcluster" / "__main__.py").is_file() else None


async def cluster_site() -> Site | None:
    """The real control plane, as the program `python -m devcluster` (a child in a session
    of its own: it stops every component when told once, by SIGTERM)."""
    root = source_checkout()
    if root is None:
        print(MISSING_DEVCLUSTER, file=sys.stderr)
        return None
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-u",
        "-m",
        "devcluster",
        f"--nodes={CLUSTER_NODES}",
        f"--gpus={CLUSTER_GPUS}",
        "--sharing",
        cwd=root,
        stdout=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None
    ready = kubeconfig = ""
    try:
        while not kubeconfig:
            line = await asyncio.wait_for(proc.stdout.readline(), CLUSTER_START_TIMEOUT)
            if not line:  # it exited; its stderr (ours) said why
                break
            text = line.decode().strip()
            if text.startswith("ready in "):
                ready = text
            elif text.startswith("export KUBECONFIG="):
                kubeconfig = text.split("=", 1)[1]
    except BaseException:
        await _terminate(proc, 120)
        raise
    if not kubeconfig:
        await _terminate(proc, 120)
        print(
            "The real control plane did not start (python -m devcluster, above).", file=sys.stderr
        )
        return None
    return Site(
        name=f"the real control plane ({CLUSTER_NODES} kwok nodes)",
        banner=(
            f"Real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, "
            f"kwok; {CLUSTER_NODES} nodes x {CLUSTER_GPUS} GPUs through DRA only, the first node's "
            f"last shareable, the others also as MIG partitions) {ready}\n"
            f"admin kubeconfig: {kubeconfig}"
        ),
        server=None,
        kubeconfig=kubeconfig,
        runs_loader=False,
        needs_cache_volume=True,
        timeout=150,  # generous: nothing here is timed, a busy 2-core machine is slow
        stop=lambda: _terminate(proc, 120),
        hints=[
            f"KUBECONFIG={kubeconfig} kubectl get pods,resourceclaims",
            f"kubectl llmkube status qwen3-32b --kubeconfig {kubeconfig}",
        ],
    )


async def demo(keep_running: bool = False, cluster: bool = False) -> int:
    """The demo on the chosen site, which is stopped however the demo ends: Ctrl-C, or
    SIGTERM (`kill`, `timeout`), which cancels it here."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    terminated = asyncio.Event()

    def on_sigterm() -> None:
        terminated.set()
        task.cancel()

    loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        site = await (cluster_site() if cluster else simulated_site())
        if site is None:
            return 2
        try:
            return await run_demo(site, keep_running)
        finally:
            await site.stop()
    except asyncio.CancelledError:
        if not terminated.is_set():  # Ctrl-C: asyncio.run raises KeyboardInterrupt
            raise
        print("Demo stopped (SIGTERM).", file=sys.stderr)
        return 128 + signal.SIGTERM
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


async def run_demo(site: Site, keep_running: bool = False) -> int:
    """The demo's steps and report, on the site's API server: 0 when every check held."""
    print(site.banner)
    client = await KubeClient.connect(site.server, site.kubeconfig)
    config = ManagerConfig(http_host="127.0.0.1", http_port=0, workers=2)
    cache = CacheSettings(enabled=True)  # the chart's default: the shared cache PVC
    manager = Manager(client, config, reconcilers=reconcilers(Settings(model_cache=cache)))
    bind_domain_metrics(manager)
    try:
        await install_crds(client)
        await _served(client, site.timeout)
        if site.needs_cache_volume:
            await _cache_volume(client)
        await manager.start()
        await manager.wait_synced()
        failed = []
        await apply_text(client, MANAGED_CLAIMS)
        print(f"applied Model and InferenceService {MANAGED} (1 GPU, no resourceClaims)")
        await apply_text(client, SHARED_SERVICES)
        print(f"applied {' and '.join(SHARED)}: gpuSharing shared, 40Gi each")
        # The shares first: a whole-GPU request may take a shareable device that no share
        # holds yet, and the cluster has one.
        if not await _wait_all(client, list(SHARED), site.timeout, _allocated):
            failed.append(f"the shares not allocated within {site.timeout:.0f} s")
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
        names = ["qwen3-embedding", "qwen3-32b", FROM_CLAIMS, MANAGED, *SHARED]
        if not ok_rejected:
            failed.append("the Model breaking a rule was admitted")
        if not await _wait_all(client, names, site.timeout, _ready):
            failed.append(f"not every service Ready within {site.timeout:.0f} s")
        await manager.wait_idle()
        if not failed and not await _wait_all(client, names, site.timeout, _allocated):
            failed.append(f"not every device allocated within {site.timeout:.0f} s")
        if not failed and not await _one_device(client, SHARED):
            failed.append(f"{' and '.join(SHARED)} do not share one device")
        await _report(client, manager, site, names)
        for name in (names[1], FROM_CLAIMS):
            print(f"\n$ kubectl llmkube status {name}")
            print(await render_status(client, NAMESPACE, name))
        delivered, shown = await _delivery(client, site)
        if not delivered:
            failed.append("the Model delivery step (above)")
        ok = not failed
        print(
            "\nDemo",
            f"succeeded on {site.name}: all six services serve on DRA claims (three on "
            f"templates the controller made, two of them sharing one GPU); {shown}."
            if ok
            else f"FAILED: {'; '.join(failed)}.",
        )
        if keep_running:
            print("Still running (Ctrl-C stops); try:")
            for hint in site.hints:
                print(f"  {hint}")
            await asyncio.Event().wait()
        return 0 if ok else 1
    finally:
        await manager.stop()
        await client.close()
