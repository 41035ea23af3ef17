"""The chart on a real node, with the real helm CLI: the controller image built from the
Dockerfile runs as the chart's Pod (in-cluster config from its projected ServiceAccount
token, the kubelet running its probes), takes the Lease, serves the webhook the
apiserver calls, is scraped by the real Prometheus through Kubernetes service discovery;
then `helm test`, `helm upgrade`, `helm rollback` and `helm uninstall` as users run them.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster.node import NodeCluster, binaries_dir
from objtypes import Obj
from tests.support.cluster_objects import get, wait_for
from tests.support.helm import NAMESPACE, RELEASE, Helm, PodController, webhook_values
from tests.support.node import container_process

pytestmark = pytest.mark.timeout(900)
IMAGE = "ghcr.io/llmkube/llmkube-py:0.1.0"
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/llmkube-controller"
# Built from Prometheus' module (scripts/build-node.sh): Debian's build has no
# kubernetes_sd_configs.
PROMETHEUS = binaries_dir() / "prometheus"


def test_the_controller_runs_from_the_chart_as_a_pod(
    node_cluster: NodeCluster, node_controller: PodController
) -> None:
    cluster, node = node_cluster.cluster, node_cluster.node
    pod = node_controller.wait_ready()
    spec = pod["spec"]
    assert spec["nodeName"] == node.name
    assert spec["serviceAccountName"] == "llmkube"
    (container,) = spec["containers"]
    assert container["image"] == IMAGE and container["imagePullPolicy"] == "IfNotPresent"
    (status,) = pod["status"]["containerStatuses"]
    assert status["ready"] and status["restartCount"] == 0
    # In-cluster config: no kubeconfig, the projected token and the Service's address.
    assert not any(a.startswith("--kubeconfig") for a in container["args"])
    projected = [v for v in spec["volumes"] if "projected" in v]
    assert any("serviceAccountToken" in s for v in projected for s in v["projected"]["sources"]), (
        spec["volumes"]
    )
    seen = container_process(node, pod, "controller")
    assert seen["env"]["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"
    assert seen["status"]["Uid"].split()[0] == "65532"  # the Dockerfile's USER
    assert Path(seen["argv"][0]).name.startswith("python") or "llmkube-controller" in " ".join(
        seen["argv"]
    )
    # The probes the kubelet runs answer (Ready, not restarted) and the Lease is its.
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    lease = wait_for(
        lambda: (get(cluster, LEASE) or {}).get("spec", {}).get("holderIdentity"),
        "the Lease held",
        cluster,
    )
    assert lease == pod["metadata"]["name"]
    assert node_controller.denied() == []


def test_the_apiserver_calls_the_webhook_served_from_the_pod(
    node_cluster: NodeCluster, node_controller: PodController
) -> None:
    cluster = node_cluster.cluster
    node_controller.wait_ready()
    ns = cluster.new_namespace("hook")
    bad = {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": "bad", "namespace": ns},
        "spec": {
            "modelRef": "m",
            "runtime": "llamacpp",
            "extraVolumes": [{"name": "host", "hostPath": {"path": "/var/lib/kubelet"}}],
        },
    }
    with pytest.raises(urllib.error.HTTPError) as refused:
        cluster.http(
            "POST", f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{ns}/inferenceservices", bad
        )
    assert refused.value.code == 403, refused.value
    status = json.loads(str(refused.value).split(": ", 3)[-1])
    assert status["message"].startswith(
        'admission webhook "validate.inference.llmkube.dev" denied the request: '
        "spec.extraVolumes[0].hostPath.path: '/var/lib/kubelet'"
    ), status


@contextmanager
def prometheus(cluster: Any, workdir: Path) -> Iterator[str]:
    """Debian's Prometheus, configured as a user without the Prometheus Operator does:
    Kubernetes service discovery of pods against the apiserver, keeping the pods whose
    prometheus.io/scrape annotation says so, at their prometheus.io/port and path."""
    config = {
        "global": {"scrape_interval": "2s"},
        "scrape_configs": [
            {
                "job_name": "kubernetes-pods",
                "kubernetes_sd_configs": [
                    {
                        "role": "pod",
                        "api_server": cluster.url,
                        "tls_config": {
                            "ca_file": str(cluster.pki.ca),
                            "cert_file": str(cluster.admin_cert[0]),
                            "key_file": str(cluster.admin_cert[1]),
                        },
                    }
                ],
                "relabel_configs": [
                    {
                        "source_labels": ["__meta_kubernetes_pod_annotation_prometheus_io_scrape"],
                        "action": "keep",
                        "regex": "true",
                    },
                    {
                        "source_labels": ["__meta_kubernetes_pod_annotation_prometheus_io_path"],
                        "target_label": "__metrics_path__",
                        "regex": "(.+)",
                    },
                    {
                        "source_labels": [
                            "__meta_kubernetes_pod_ip",
                            "__meta_kubernetes_pod_annotation_prometheus_io_port",
                        ],
                        "regex": "(.+);(\\d+)",
                        "replacement": "$1:$2",
                        "target_label": "__address__",
                    },
                    {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
                    {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
                ],
            }
        ],
    }
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = 19090
    log = (workdir / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            str(PROMETHEUS),
            f"--config.file={workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def _query(url: str, expr: str) -> list[Obj]:
    try:
        with urllib.request.urlopen(
            f"{url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}", timeout=5
        ) as r:
            result: list[Obj] = json.loads(r.read())["data"]["result"]
            return result
    except (urllib.error.URLError, OSError):
        return []


def test_prometheus_finds_the_pod_through_kubernetes_discovery_and_scrapes_it(
    node_cluster: NodeCluster, node_controller: PodController, tmp_path: Path
) -> None:
    cluster = node_cluster.cluster
    pod = node_controller.wait_ready()
    name = pod["metadata"]["name"]
    with prometheus(cluster, tmp_path) as url:
        deadline = time.monotonic() + 90
        while not (up := [r for r in _query(url, f'up{{pod="{name}"}}') if r["value"][1] == "1"]):
            if time.monotonic() > deadline:
                targets = urllib.request.urlopen(f"{url}/api/v1/targets", timeout=5).read()
                log = (tmp_path / "prometheus.log").read_text()[-3000:]
                raise AssertionError(f"not scraped: {targets[:3000]!r}\n{log}")
            time.sleep(1)
        assert up[0]["metric"]["namespace"] == NAMESPACE
        assert up[0]["metric"]["instance"] == f"{pod['status']['podIP']}:8080"
        # controller-runtime's names, from the pod.
        for metric in ("controller_runtime_reconcile_total", "workqueue_depth"):
            found = wait_for(
                lambda m=metric: _query(url, f'{m}{{pod="{name}"}}') or None,  # type: ignore[misc]
                f"{metric} scraped",
                cluster,
                timeout=30,
            )
            assert found


def _deployment(cluster: Any, namespace: str, name: str) -> Obj | None:
    obj: Obj | None = get(cluster, f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
    return obj


def test_helm_test_upgrade_rollback_and_uninstall(
    node_cluster: NodeCluster, node_controller: PodController, helm: Helm
) -> None:
    cluster = node_cluster.cluster
    node_controller.wait_ready()
    # helm test: its hook Pod (the controller's image) reaches /readyz through the Service.
    out = helm.run("test", RELEASE, "--namespace", NAMESPACE, "--timeout", "3m")
    assert "Phase:          Succeeded" in out or "Succeeded" in out, out

    # Something of a user's, owned by the controller, must survive what follows untouched.
    ns = cluster.new_namespace("helm")
    for doc in yaml.safe_load_all(
        f"""
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {{name: m, namespace: {ns}}}
spec: {{source: "https://example.com/m.gguf", format: gguf}}
---
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata: {{name: s, namespace: {ns}}}
spec: {{modelRef: m, runtime: llamacpp, replicas: 0}}
"""
    ):
        cluster.apply(doc)
    owned = wait_for(lambda: _deployment(cluster, ns, "s"), "the service's Deployment", cluster)
    uid, generation = owned["metadata"]["uid"], owned["metadata"]["generation"]
    before = node_controller.pod()["metadata"]["name"]

    # helm upgrade with a changed value rolls the controller; nothing it owns is re-made.
    values = webhook_values(cluster)
    helm.upgrade({**values, "logLevel": "debug"})
    after = node_controller.wait_ready()
    assert after["metadata"]["name"] != before
    assert "--zap-log-level=debug" in after["spec"]["containers"][0]["args"]
    time.sleep(5)  # the new pod has reconciled everything once
    again = _deployment(cluster, ns, "s")
    assert again is not None
    assert (again["metadata"]["uid"], again["metadata"]["generation"]) == (uid, generation)

    # helm rollback: revision 1's values again, as revision 3.
    helm.run("rollback", RELEASE, "1", "--namespace", NAMESPACE, "--wait", "--timeout", "4m")
    assert [h["revision"] for h in helm.history()] == [1, 2, 3]
    back = node_controller.wait_ready()
    assert not any(a == "--zap-log-level=debug" for a in back["spec"]["containers"][0]["args"])

    # helm uninstall: the controller goes; the CRDs and users' objects stay (Helm never
    # deletes what crds/ installed).
    helm.run("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", "--timeout", "3m")
    wait_for(lambda: not node_controller.pods() or None, "the controller pods gone", cluster)
    crd = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
    assert get(cluster, crd + "inferenceservices.inference.llmkube.dev") is not None
    assert get(cluster, f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{ns}/models/m")
    assert _deployment(cluster, ns, "s") is not None

    # Installed again, for the tests after this one.
    helm.install(webhook_values(cluster))
    node_controller.wait_ready()
