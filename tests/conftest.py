"""The tests' fixtures: the test API server and a controller on it, the real control
plane, the real node, and those shared by tests of more than one tier. Helpers live in
tests/support/; each test's tier is its folder (tests/support/tiers.py)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from app.manifests import install_crds
from controller import logging as log_setup
from controller.kube import KubeClient
from controller.manager import Manager
from devcluster import KubeCluster
from devcluster.node import NodeCluster
from objtypes import Obj
from tests.support.helm import Helm, PodController, webhook_values
from tests.support.kube_cluster import (
    ControllerProcess,
    device_taint_gates,
    kube_binaries,
    kube_version,
    node_requirements,
    run_chart_controller,
)
from tests.support.loader_script import Origin, _busybox_bin, _serve
from tests.support.manager import manager_for
from tests.support.packaging import ROOT, SOURCES
from tests.support.tiers import misfiled
from testserver.process import ApiServerProcess

log_setup.configure("warning")
TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test is in exactly one tier, its folder's; a test whose fixtures or marks
    need another tier is refused at collection, naming it."""
    wrong = misfiled(items, TESTS)
    if wrong:
        raise pytest.UsageError("misfiled tests:\n" + "\n".join(wrong))


# -- every tier --------------------------------------------------------------------------


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


# -- the server tier: the test API server process -------------------------------------------


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


@pytest.fixture
async def controller(kube: KubeClient) -> AsyncIterator[Manager]:
    manager = manager_for(kube)
    await manager.start()
    await manager.wait_synced()
    yield manager
    await manager.stop()


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


@pytest.fixture(scope="module")
def taints_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    """A control plane of the module's own with device taints (KEP-5055) on: the
    DRADeviceTaints gate and DeviceTaintRule's API where the version needs them
    (device_taint_gates), one kwok node with one fake GPU, the CRDs installed."""
    bin_dir = kube_binaries()
    gates, runtime = device_taint_gates(kube_version(bin_dir))
    cluster = KubeCluster(
        bin_dir,
        tmp_path_factory.mktemp("kube-taints"),
        nodes=1,
        gpus=1,
        feature_gates=gates,
        runtime_config=runtime,
    ).start()
    cluster.install_crds(sorted((TESTS.parent / "charts/llmkube/crds").glob("*.yaml")))
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def sharing_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeCluster]:
    """A control plane of the module's own whose one kwok node has a GPU that allows
    multiple allocations and one published as MIG partitions (fake_dra_driver --sharing),
    with the gates those need before 1.36, the CRDs installed."""
    cluster = KubeCluster(
        kube_binaries(), tmp_path_factory.mktemp("kube-sharing"), nodes=1, gpus=2, sharing=True
    ).start()
    cluster.install_crds(sorted((TESTS.parent / "charts/llmkube/crds").glob("*.yaml")))
    yield cluster
    cluster.stop()


# -- the cluster tier: clients and namespaces on the real control plane ---------------------


@pytest.fixture(scope="session")
def llmkube_crds(kube_cluster: KubeCluster) -> list[Obj]:
    """The generated CRDs, created on the real apiserver once and Established."""
    return kube_cluster.install_crds(sorted((TESTS.parent / "charts/llmkube/crds").glob("*.yaml")))


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


# -- shared by tests of the loader script and of packaging in more than one tier ------------
# from tests/unit/test_loader_script.py: origin


@pytest.fixture
def origin() -> Iterator[tuple[Origin, str]]:
    o = Origin()
    for url in _serve(o):
        yield o, url


# from tests/unit/test_loader_script.py: shell


@pytest.fixture(params=["sh", "busybox"])
def shell(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The PATH the loader runs with."""
    if request.param == "busybox":
        return _busybox_bin(tmp_path_factory.mktemp("bin"))
    return "/usr/bin:/bin"


# from tests/unit/test_packaging.py: wheels


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both wheels, built from a clean copy of the sources (no stale build/ directory)."""
    src = tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns("__pycache__", "build", "*.egg-info")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=ignore)
        elif (ROOT / name).exists():
            shutil.copy(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("wheels")
    pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
    pip += ["--wheel-dir", str(out)]
    subprocess.run([*pip, str(src), str(src / "packaging" / "testserver")], check=True)
    return {p.name.split("-")[0]: p for p in out.glob("*.whl")}
