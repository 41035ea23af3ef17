"""The chart's ValidatingWebhookConfiguration, called by the real kube-apiserver.

The chart points the webhook at its Service; kube-apiserver reaches a Service through its
ClusterIP or (with aggregator routing) its EndpointSlices, whose addresses may not be
loopback, and this machine has only loopback. So the configuration the chart renders is
applied with one change: `clientConfig.url` (https://127.0.0.1:<port> and the chart's
path) instead of `clientConfig.service`, with the CA bundle of the certificate the
controller serves, and a namespaceSelector keeping it to this test's namespace.
"""

from __future__ import annotations

import base64
import shutil
import urllib.error
from pathlib import Path

import pytest
import yaml

from app.manifests import EXAMPLES
from devcluster import KubeCluster, free_port
from tests.support import chart
from tests.support.cluster_objects import wait_for
from tests.support.kube_cluster import ControllerProcess, start_controller

pytestmark = pytest.mark.timeout(600)

MULTI_NODE_SERVICE = {
    "apiVersion": "inference.llmkube.dev/v1alpha1",
    "kind": "InferenceService",
    "metadata": {"name": "spread"},
    "spec": {
        "modelRef": "qwen3-32b",
        "runtime": "vllm",
        "multiNode": {
            "members": [
                {"node": "kwok-node-0", "fabric": {"address": "10.0.0.1"}},
                {"node": "kwok-node-1"},
            ]
        },
    },
}


def test_the_apiserver_calls_our_webhook_and_a_bad_spec_is_refused(
    kube_cluster: KubeCluster,
    chart_controller: ControllerProcess,
    namespace: str,
    tmp_path: Path,
) -> None:
    certs = tmp_path / "certs"
    certs.mkdir()
    crt, key = kube_cluster.pki.issue("webhook", "llmkube-webhook", server=True)
    shutil.copy(crt, certs / "tls.crt")
    shutil.copy(key, certs / "tls.key")
    ca = base64.b64encode(kube_cluster.pki.ca.read_bytes()).decode()
    values = {"certManager": {"enabled": False}, "caBundle": ca, "certSecretName": "webhook-tls"}
    docs = chart.render({"webhook": values})
    config = chart.find(docs, "ValidatingWebhookConfiguration")
    port = free_port()
    config["metadata"]["name"] = f"llmkube-{namespace}"
    for hook in config["webhooks"]:
        path = hook["clientConfig"].pop("service")["path"]
        hook["clientConfig"]["url"] = f"https://127.0.0.1:{port}{path}"
        hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    args = [a for a in chart.controller_args(docs) if not a.startswith("--webhook-")]
    args += [f"--webhook-port={port}", f"--webhook-cert-dir={certs}", f"--namespace={namespace}"]
    account = chart.find(docs, "ServiceAccount")["metadata"]["name"]
    sa_config = kube_cluster.kubeconfig_for(chart.NAMESPACE, account, tmp_path / "kubeconfig")
    served = start_controller(kube_cluster, args, sa_config, f"webhook-{namespace}")
    try:
        wait_for(lambda: served.ready() or None, "the webhook's controller ready", kube_cluster)
        kube_cluster.apply(config, manager="helm")
        for doc in yaml.safe_load_all((EXAMPLES / "multi-gpu.yaml").read_text()):
            if doc["kind"] != "InferenceService":
                doc["metadata"]["namespace"] = namespace
                kube_cluster.apply(doc)
        bad = dict(MULTI_NODE_SERVICE, metadata={"name": "spread", "namespace": namespace})

        def refused() -> str | None:
            try:
                kube_cluster.apply(bad)
            except urllib.error.HTTPError as e:
                if "denied the request" in str(e.reason):
                    return str(e.reason)
                raise
            return None  # admitted: the Model was not in the webhook's cache yet

        message = wait_for(refused, "the apiserver refusing through our webhook", kube_cluster)
        # The Status message, JSON-quoted: admission webhook "<name>" denied the request: ...
        assert 'admission webhook \\"validate.inference.llmkube.dev\\" denied the request' in (
            message
        ), message
        assert "run DRA models single-node" in message
        assert "spec.multiNode" in message, message
        # A good spec passes the same webhook.
        good = {
            "apiVersion": "inference.llmkube.dev/v1alpha1",
            "kind": "InferenceService",
            "metadata": {"name": "qwen3-32b", "namespace": namespace},
            "spec": {"modelRef": "qwen3-32b", "runtime": "vllm"},
        }
        assert kube_cluster.apply(good)["metadata"]["name"] == "qwen3-32b"
        assert served.denied() == [] and served.api_errors(namespace) == []
    finally:
        kube_cluster.http(
            "DELETE",
            f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{config['metadata']['name']}",
        )
        served.component.stop()
