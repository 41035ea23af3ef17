"""Fixtures: a real test API server process, a client with the CRDs installed, a controller."""

from __future__ import annotations

import asyncio
import shutil
import signal
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import trustme

from app.controllers import reconcilers
from app.manifests import apply_text, install_crds
from controller import logging as log_setup
from controller.clock import REAL, Clock
from controller.errors import ApiError
from controller.kube import KubeClient
from controller.manager import Manager, ManagerConfig
from devcluster import KubeCluster, binaries_dir, missing_binaries
from devcluster.node import NodeCluster
from objtypes import Obj
from testserver.process import ApiServerProcess

from .support import chart
from .support.helm import Helm, PodController, webhook_values
from .support.kube_cluster import ControllerProcess, install_chart, start_controller

T = TypeVar("T")
log_setup.configure("warning")


# -- tiers: `make test` runs `pytest -m unit`, then (if it passed) `pytest -m server`, then
# `pytest -m cluster` (the real control plane: devcluster/) ------------------------------


# The fixtures that start the test API server process (kube and controller build on
# apiserver; the others start their own: a simulated cluster, TLS, a long history).
SERVER_FIXTURES = frozenset(
    {
        "apiserver",
        "cluster",
        "dra_cluster",
        "tls_apiserver",
        "chaos_server",
        "secured",
        "tls_server",
    }
)


# The fixtures that start the real control plane (etcd, kube-apiserver, ...): the third tier.
CLUSTER_FIXTURES = frozenset({"kube_cluster", "own_kube_cluster"})


# The fixture that starts the control plane with a real node (kubelet, containerd, runc,
# the DRA example plugin) inside a network namespace of its own: the fourth tier.
NODE_FIXTURES = frozenset({"node_cluster"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test is in exactly one tier. `node`: it uses one of NODE_FIXTURES (or is
    marked so: the node demo); `cluster`: it uses one of CLUSTER_FIXTURES;
    `server`: it uses one of SERVER_FIXTURES, or is marked so because it starts the server
    another way (a bench run, the demo, inline); `unit`: all the others. A unit test that
    starts the server fails, naming the mark."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if NODE_FIXTURES & fixtures:
            item.add_marker(pytest.mark.node)
        elif item.get_closest_marker("node") is not None:
            pass
        elif CLUSTER_FIXTURES & fixtures:
            item.add_marker(pytest.mark.cluster)
        elif SERVER_FIXTURES & fixtures:
            item.add_marker(pytest.mark.server)
        if not any(item.get_closest_marker(m) for m in ("server", "cluster", "node")):
            item.add_marker(pytest.mark.unit)


def kube_binaries() -> Path:
    """The built control plane's folder; the test is skipped, saying why, without it."""
    bin_dir = binaries_dir()
    missing = missing_binaries(bin_dir)
    if missing:
        pytest.skip(
            f"Kubernetes binaries not built ({', '.join(missing)} missing in {bin_dir}): "
            "run `make kube-binaries` (scripts/build-kube.sh), which says why it fails"
        )
    return bin_dir


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    """The real control plane, one for the whole cluster tier (tests use namespaces of
    their own); skipped, saying why, where `make kube-binaries` could not build it."""
    cluster = KubeCluster(kube_binaries(), tmp_path_factory.mktemp("kube")).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def own_kube_cluster(tmp_path: Path) -> Iterator[KubeCluster]:
    """A control plane of this test's own, for what would disturb the others (etcd put
    back to an older copy); skipped like `kube_cluster`."""
    cluster = KubeCluster(kube_binaries(), tmp_path / "kube").start()
    yield cluster
    cluster.stop()


def node_requirements() -> tuple[list[str], str]:
    """What a real node lacks here, and how to get it."""
    from devcluster import node

    return node.missing(binaries_dir(), node.binaries_dir()), (
        "run `make kube-binaries node-binaries` (scripts/build-kube.sh, scripts/build-node.sh) "
        "as root"
    )


@pytest.fixture(scope="session")
def node_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeCluster]:
    """The control plane and one real node, for the whole node tier (tests use
    namespaces of their own). This process enters the node's network namespace for the
    session. Skipped, saying what is missing, where the binaries or root are not there."""
    from devcluster import node
    from devcluster.images import ImageBuildError, build_images

    lacks, how = node_requirements()
    if lacks:
        pytest.skip(f"no real node here ({'; '.join(lacks)}): {how}")
    try:
        images = build_images(node.images_dir())
    except ImageBuildError as e:
        pytest.skip(f"the node tier's images could not be built: {e}")
    # A short folder: unix socket paths below it must stay under 108 bytes.
    workdir = Path(tempfile.mkdtemp(prefix="lkn-", dir="/tmp"))
    # A TERM (a CI timeout, `kill`) unwinds like ^C, so the node is stopped and removed.
    previous = signal.signal(signal.SIGTERM, _interrupt)
    started = node.start_node_cluster(workdir, images)
    try:
        yield started
    finally:
        started.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(autouse=True)
def _unit_tests_start_no_server(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A unit-tier test that starts the test API server is misfiled: say so, loudly."""
    if request.node.get_closest_marker("server") is not None:
        return
    if request.node.get_closest_marker("node") is not None:
        return
    if request.node.get_closest_marker("cluster") is not None:
        return  # the cluster tier may run the test server beside kube-apiserver (differential)

    async def refuse(*args: object, **kwargs: object) -> ApiServerProcess:
        raise AssertionError(
            f"{request.node.nodeid} starts the test API server: mark it @pytest.mark.server"
        )

    monkeypatch.setattr(ApiServerProcess, "start", refuse)


@pytest.fixture
async def apiserver() -> AsyncIterator[ApiServerProcess]:
    server = await ApiServerProcess.start("--bookmark-interval", "0.2")
    yield server
    await server.stop()


@pytest.fixture
async def kube(apiserver: ApiServerProcess) -> AsyncIterator[KubeClient]:
    client = await KubeClient.connect(apiserver.url)
    await install_crds(client)
    yield client
    await client.close()


def manager_for(client: KubeClient, *, clock: Clock = REAL, **overrides: Any) -> Manager:
    config = ManagerConfig(http_port=0, http_host="127.0.0.1", workers=2, watch_timeout=30)
    for key, value in overrides.items():
        setattr(config, key, value)
    return Manager(client, config, reconcilers=reconcilers(), clock=clock)


@pytest.fixture
async def controller(kube: KubeClient) -> AsyncIterator[Manager]:
    manager = manager_for(kube)
    await manager.start()
    await manager.wait_synced()
    yield manager
    await manager.stop()


async def eventually(
    probe: Callable[[], Awaitable[T | None]], timeout: float = 10.0, what: str = "condition"
) -> T:
    """Poll probe until it returns something truthy; fail with what it last saw."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = await probe()
        except AssertionError as e:
            last = e
        else:
            if last:
                result: T = last
                return result
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    """The status condition of this type, if the object has it."""
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == type_:
            return c
    return None


async def wait_condition(
    client: KubeClient,
    rt: Any,
    name: str,
    type_: str,
    status: str,
    reason: str | None = None,
    namespace: str = "default",
    timeout: float = 10.0,
) -> dict[str, Any]:
    """Wait until the object's condition has this status (and reason); return the object."""

    async def probe() -> dict[str, Any] | None:
        obj = await client.get(rt, namespace, name)
        c = condition(obj, type_)
        if c and c["status"] == status and (reason is None or c["reason"] == reason):
            return obj
        return None

    return await eventually(probe, timeout, what=f"{name} {type_}={status} {reason or ''}")


def model_yaml(name: str, gpu: str, extra: str = "") -> str:
    """A Model manifest; gpu is the YAML body under spec.hardware.gpu, indented 6."""
    return f"""
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {{name: {name}}}
spec:
  source: Qwen/Qwen3-8B
  format: safetensors
  hardware:
    accelerator: cuda
    gpu:
{gpu}
{extra}
"""


def isvc_yaml(name: str, model: str, runtime: str = "vllm", extra: str = "") -> str:
    """An InferenceService manifest; extra is more YAML under spec, indented 2."""
    return f"""
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata: {{name: {name}}}
spec:
  modelRef: {model}
  runtime: {runtime}
{extra}
"""


# spec.hardware.gpu of a Model with count 2 on the per-pod template "two-gpus".
def two_gpu_claims(count: int | None = None) -> str:
    """spec.hardware.gpu (indented 6) of a Model on the two-gpus template; count if given."""
    counted = f"      count: {count}\n" if count is not None else ""
    return (
        f"      enabled: true\n{counted}      resourceClaims:\n"
        "        - {name: gpus, resourceClaimTemplateName: two-gpus}"
    )


TWO_GPU_CLAIMS = two_gpu_claims(2)


def quota_yaml(limit: int, name: str = "team", scope: str = "namespaceRef: default") -> str:
    return f"""
apiVersion: inference.llmkube.dev/v1alpha1
kind: GPUQuota
metadata: {{name: {name}}}
spec: {{gpuCount: {limit}, {scope}}}
"""


def claim_template(name: str, requests: str) -> str:
    """A ResourceClaimTemplate manifest; requests is the YAML list under
    spec.spec.devices.requests, indented 8."""
    return f"""
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{name: {name}}}
spec:
  spec:
    devices:
      requests:
{requests}
"""


def gpu_template(name: str, count: int) -> str:
    """A template asking for exactly count GPUs of the simulated cluster's class."""
    exactly = f"{{deviceClassName: gpu.nvidia.com, allocationMode: ExactCount, count: {count}}}"
    return claim_template(name, f"        - name: gpu\n          exactly: {exactly}")


def reconciles(manager: Manager, controller: str, result: str = "success") -> float:
    """controller_runtime_reconcile_total for one controller and result."""
    value = manager.metrics.registry.get_sample_value(
        "controller_runtime_reconcile_total", {"controller": controller, "result": result}
    )
    return value or 0.0


async def reapply(client: KubeClient, text: str, namespace: str = "default") -> None:
    """apply_text, retried on 409: a replace can race the controller's status writes."""
    for attempt in range(10):
        try:
            await apply_text(client, text, namespace)
            return
        except ApiError as e:
            if e.status != 409 or attempt == 9:
                raise
            await asyncio.sleep(0.05)


def write_serving_cert(ca: trustme.CA, cert_dir: Path) -> None:
    """A webhook serving certificate for 127.0.0.1 from ca, as tls.crt / tls.key."""
    cert = ca.issue_cert("localhost", "127.0.0.1")
    cert.private_key_pem.write_to_path(str(cert_dir / "tls.key"))
    cert.cert_chain_pems[0].write_to_path(str(cert_dir / "tls.crt"))


# What the NVIDIA DRA driver publishes on a cluster with one 4-GPU node: the DeviceClass
# and the node's ResourceSlice (the simulated cluster seeds the same objects).
DRA_CLUSTER_YAML = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec:
  selectors:
    - cel: {expression: 'device.driver == "gpu.nvidia.com"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: gpu-node-1-gpu.nvidia.com}
spec:
  driver: gpu.nvidia.com
  nodeName: gpu-node-1
  pool: {name: gpu-node-1, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0}, {name: gpu-1}, {name: gpu-2}, {name: gpu-3}]
"""


# -- the cluster tier: clients and namespaces on the real control plane ---------------------


@pytest.fixture(scope="session")
def llmkube_crds(kube_cluster: KubeCluster) -> list[Obj]:
    """The generated CRDs, created on the real apiserver once and Established."""
    return kube_cluster.install_crds(
        sorted((Path(__file__).parent.parent / "charts/llmkube/crds").glob("*.yaml"))
    )


@pytest.fixture
async def admin(kube_cluster: KubeCluster) -> AsyncIterator[KubeClient]:
    """Our client with the cluster admin's certificate (system:masters)."""
    client = await KubeClient.connect(None, str(kube_cluster.admin_kubeconfig))
    yield client
    await client.close()


@pytest.fixture
def namespace(kube_cluster: KubeCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of this test's own on the shared cluster, deleted afterwards (the real
    namespace controller empties it)."""
    name = kube_cluster.new_namespace(request.node.name)
    yield name
    kube_cluster.delete_namespace(name)


# The chart as the cluster tier installs it: defaults, less the webhook (its certificate
# comes from cert-manager, which this cluster does not run), with the Pyrra switch on
# (spec.slo: test_cluster_slo_and_gateway.py; no other test sets it).
CLUSTER_CHART_VALUES: Obj = {"webhook": {"enabled": False}, "pyrra": {"enabled": True}}


@pytest.fixture(scope="session")
def chart_controller(
    kube_cluster: KubeCluster,
    llmkube_crds: list[Obj],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ControllerProcess]:
    """The chart installed, and the controller running as a process with the chart's args
    under the chart ServiceAccount's token: a rule missing from its ClusterRole is a 403."""
    proc = run_chart_controller(kube_cluster, tmp_path_factory.mktemp("sa"))
    yield proc
    proc.component.stop()


def run_chart_controller(cluster: KubeCluster, directory: Path) -> ControllerProcess:
    """Install the chart (CLUSTER_CHART_VALUES) and start its controller; once ready."""
    docs = chart.render(CLUSTER_CHART_VALUES)
    install_chart(cluster, docs, chart.NAMESPACE)
    account = chart.find(docs, "ServiceAccount")["metadata"]["name"]
    config = cluster.kubeconfig_for(chart.NAMESPACE, account, directory / "kubeconfig")
    proc = start_controller(cluster, chart.controller_args(docs), config, "llmkube-0")
    deadline = time.monotonic() + 120
    while not proc.ready():
        if time.monotonic() > deadline or not proc.component.running():
            proc.component.stop()
            raise AssertionError(f"the controller never became ready:\n{proc.log()[-4000:]}")
        time.sleep(0.2)
    return proc


# -- the node tier: the same control plane with a real node ---------------------------------


@pytest.fixture(scope="session")
def helm(node_cluster: NodeCluster, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    """The real helm CLI against the node's control plane."""
    from devcluster.node import binaries_dir

    return Helm(binaries_dir() / "helm", node_cluster.cluster, tmp_path_factory.mktemp("helm"))


@pytest.fixture(scope="session")
def node_controller(node_cluster: NodeCluster, helm: Helm) -> PodController:
    """The chart installed by `helm install` (CRDs, RBAC, the webhook with its
    certificate, the Deployment of the locally built image) and its controller Pod Ready
    on the real node. Tests that upgrade or uninstall the release leave it installed."""
    cluster = node_cluster.cluster
    helm.install(webhook_values(cluster))
    controller = PodController(cluster)
    controller.wait_ready()
    return controller
