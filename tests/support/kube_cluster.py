"""The product on the real control plane (devcluster/): the chart installed as `helm
install` would, and the controller run as a process under the chart's ServiceAccount."""

from __future__ import annotations

import re
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from devcluster import (
    CLUSTER_SCOPED,
    Component,
    KubeCluster,
    binaries_dir,
    binaries_version,
    free_port,
    missing_binaries,
)
from objtypes import Obj

from . import chart


def install_chart(cluster: KubeCluster, docs: list[dict[str, Any]], namespace: str) -> None:
    """Apply a rendered chart as `helm install` would (its test hooks left out)."""
    if not cluster._exists(f"/api/v1/namespaces/{namespace}"):
        cluster.http(
            "POST",
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        )
    for doc in docs:
        if "helm.sh/hook" in (doc["metadata"].get("annotations") or {}):
            continue
        if doc["kind"] not in CLUSTER_SCOPED:
            doc["metadata"].setdefault("namespace", namespace)
        cluster.apply(doc, manager="helm")


class ControllerLog:
    """What a controller's log says about its requests: `log()` is the whole log."""

    def __init__(self) -> None:
        self.log_mark = 0

    def log(self) -> str:
        raise NotImplementedError

    def denied(self) -> list[str]:
        """Log lines, since the last `forget_errors()`, of requests the RBAC authorizer
        refused (`... is forbidden: User "system:serviceaccount:..." cannot <verb>
        resource ...`). Other 403s, such as a write into a namespace being deleted, are
        not RBAC's and are not listed."""
        return [line for line in self._since_mark() if "is forbidden: User" in line]

    def api_errors(self, namespace: str) -> list[str]:
        """Log lines, since the last `forget_errors()`, of API errors about objects in
        `namespace` other than those a real cluster hands every controller: 409 Conflict
        (a stale resourceVersion) and a write into a namespace being deleted or gone. A
        400/422/500 here is a request of ours the apiserver refused (a schema, CEL or
        server-side-apply error). Other namespaces are other tests', torn down while the
        controller may still be reconciling them."""
        found = []
        for line in self._since_mark():
            if f'"namespace": "{namespace}"' not in line:
                continue
            if not re.search(r'"error": "[45]\d\d ', line):
                continue
            if '"error": "409 ' in line or "because it is being terminated" in line:
                continue
            if re.search(r'"error": "404 NotFound: namespaces \\"[^"\\]*\\" not found', line):
                continue  # the namespace went away between the read and the write
            found.append(line)
        return found

    def forget_errors(self) -> None:
        """Errors logged so far are expected (an apiserver that has just restarted
        refuses every request until its RBAC caches have synced, and the controller
        retries): `denied()` and `api_errors()` read only what is logged after this."""
        self.log_mark = len(self.log())

    def _since_mark(self) -> list[str]:
        return self.log()[self.log_mark :].splitlines()


class ControllerProcess(ControllerLog):
    """`llmkube-controller run` as its own process, with the args the chart gives it."""

    def __init__(self, component: Component, health_port: int) -> None:
        super().__init__()
        self.component = component
        self.health_port = health_port

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.health_port}/readyz", timeout=5
            ) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def log(self) -> str:
        return self.component.log.read_text(errors="replace")

    def metrics(self) -> str:
        """Its Prometheus metrics (the probe server answers /metrics too)."""
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.health_port}/metrics", timeout=10
        ) as resp:
            text: str = resp.read().decode()
        return text


def start_controller(
    cluster: KubeCluster, chart_args: list[str], kubeconfig_path: Path, name: str
) -> ControllerProcess:
    """Run the controller with the chart's args, its addresses moved to free loopback ports,
    under the credentials of `kubeconfig_path`."""
    health = free_port()
    args = [
        a
        for a in chart_args
        if not a.startswith(("--metrics-bind-address", "--health-probe-bind-address"))
    ]
    if args and args[0] == "run":
        args = args[1:]
    exe = Path(sys.executable).with_name("llmkube-controller")
    component = cluster._component(
        name,
        [
            str(exe),
            "run",
            *args,
            f"--health-probe-bind-address=127.0.0.1:{health}",
            "--metrics-bind-address=0",
            f"--kubeconfig={kubeconfig_path}",
            f"--identity={name}",
        ],
    )
    component.start()
    return ControllerProcess(component, health)


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


def kube_version(bin_dir: Path) -> tuple[int, int]:
    """(major, minor) of the binaries scripts/build-kube.sh keeps in kube-<version>-<arch>/bin."""
    return binaries_version(bin_dir)


def device_taint_gates(version: tuple[int, int]) -> tuple[dict[str, bool], tuple[str, ...]]:
    """What a control plane needs for device taints (KEP-5055): before 1.36 the
    DRADeviceTaints gate is alpha (off) and DeviceTaintRule is served only as
    resource.k8s.io/v1alpha3 (which 1.34's device-taint-eviction-controller also reads);
    from 1.36 the gate is on by default and nothing is given."""
    if version >= (1, 36):
        return {}, ()
    return {"DRADeviceTaints": True}, ("resource.k8s.io/v1alpha3=true",)


def node_requirements() -> tuple[list[str], str]:
    """What a real node lacks here, and how to get it."""
    from devcluster import node

    return node.missing(binaries_dir(), node.binaries_dir()), (
        "run `make kube-binaries node-binaries` (scripts/build-kube.sh, scripts/build-node.sh) "
        "as root"
    )


# The chart as the cluster tier installs it: defaults, less the webhook (its certificate
# comes from cert-manager, which this cluster does not run), with the Pyrra switch on
# (spec.slo: tests/cluster/test_cluster_slo_and_gateway.py; no other test sets it).
CLUSTER_CHART_VALUES: Obj = {"webhook": {"enabled": False}, "pyrra": {"enabled": True}}


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
