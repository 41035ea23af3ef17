"""etcd put back to an older copy under a running cluster: resourceVersions go backwards.

The controller's watches break with the apiserver; when they come back the server is
behind what the controller has seen. It must notice (the server answers a read at its
last resourceVersion with 504 ResourceVersionTooLarge), relist, and forget what the older
copy does not hold: a service created after the copy is not charged to the GPUQuota any
more, and one deleted after it is back and charged.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from devcluster import KubeCluster
from objtypes import Obj
from tests.support.cluster_objects import SMALL_MODEL, apply_yaml, get, model_cache_volume, wait_for
from tests.support.kube_cluster import run_chart_controller
from tests.support.paths import REPO

pytestmark = pytest.mark.timeout(900)

CRDS = REPO / "charts/llmkube/crds"
API = "/apis/inference.llmkube.dev/v1alpha1/namespaces"


def quota(ns: str, gpus: int) -> str:
    return f"""
apiVersion: inference.llmkube.dev/v1alpha1
kind: GPUQuota
metadata: {{name: team}}
spec: {{gpuCount: {gpus}, namespaceRef: {ns}}}
"""


def service(name: str) -> str:
    return f"""
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata: {{name: {name}}}
spec: {{modelRef: small, replicas: 1}}
"""


def charged(cluster: KubeCluster, ns: str, names: set[str], generation: int = 0) -> Obj | None:
    """The quota's status, once it charges exactly `names`, one admitted GPU each, for
    its spec generation `generation` or later."""
    q = get(cluster, f"{API}/{ns}/gpuquotas/team") or {}
    status = q.get("status") or {}
    rows = status.get("services") or []
    if status.get("observedGeneration", 0) < generation:
        return None
    if {r["name"] for r in rows} != names or status.get("usedGPUCount") != len(names):
        return None
    return q if all(r.get("admittedReplicas") == 1 for r in rows) else None


def test_etcd_restored_from_an_older_copy_relists_and_charges_no_ghost(
    own_kube_cluster: KubeCluster, tmp_path: Path
) -> None:
    cluster = own_kube_cluster
    cluster.install_crds(sorted(CRDS.glob("*.yaml")))
    controller = run_chart_controller(cluster, tmp_path)
    ns = cluster.new_namespace("restore")
    model_cache_volume(cluster, ns)
    apply_yaml(cluster, quota(ns, 8) + "---" + SMALL_MODEL, ns)
    apply_yaml(cluster, service("kept") + "---" + service("revived"), ns)
    wait_for(lambda: charged(cluster, ns, {"kept", "revived"}), "kept, revived charged", cluster)

    copy = cluster.snapshot_etcd(tmp_path / "etcd-copy")
    wait_for(lambda: controller.ready() or None, "the controller ready again", cluster)
    cluster.http("DELETE", f"{API}/{ns}/inferenceservices/revived")
    apply_yaml(cluster, service("ghost"), ns)
    wait_for(lambda: charged(cluster, ns, {"kept", "ghost"}), "kept, ghost charged", cluster)

    cluster.restore_etcd(copy)
    # Back in time, as the objects say: what was deleted after the copy is there again,
    # what was made after it is gone. (Not the quota's resourceVersion: the writes after
    # the restart, leases and the controller's own, can carry it past the later one.)
    assert get(cluster, f"{API}/{ns}/inferenceservices/revived") is not None
    assert get(cluster, f"{API}/{ns}/inferenceservices/ghost") is None
    controller.forget_errors()  # an apiserver starting refuses requests for a while

    # A spec change makes the controller charge the quota anew from its cache: room for
    # two GPUs, so a ghost still in the cache would hold one service back.
    apply_yaml(cluster, quota(ns, 2), ns)
    generation = (get(cluster, f"{API}/{ns}/gpuquotas/team") or {})["metadata"]["generation"]
    wait_for(
        lambda: charged(cluster, ns, {"kept", "revived"}, generation),
        "the quota charging kept and revived again, no ghost",
        cluster,
    )

    def ready(name: str) -> Obj | None:
        isvc = get(cluster, f"{API}/{ns}/inferenceservices/{name}") or {}
        return isvc if (isvc.get("status") or {}).get("phase") == "Ready" else None

    wait_for(lambda: ready("revived"), "the revived service Ready", cluster)
    assert not controller.api_errors(ns)
    controller.component.stop()
