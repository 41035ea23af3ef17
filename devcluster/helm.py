"""The real helm CLI (scripts/build-node.sh builds helm.sh/helm/v4) against a devcluster
control plane, installing charts/llmkube as a user does: `helm install` with the locally
built image (already in the node's containerd under the chart's name, so nothing is
pulled), the CRDs from the chart's crds/ folder, and the webhook's serving certificate as
a TLS Secret with its CA in `webhook.caBundle` (the chart's path without cert-manager)."""

from __future__ import annotations

import base64
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .cluster import KubeCluster

Obj = dict[str, Any]
ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts/llmkube"
RELEASE = "llmkube"
NAMESPACE = "llmkube-system"
WEBHOOK_SECRET = "llmkube-webhook-tls"
SELECTOR = "app.kubernetes.io/name=llmkube"
# What the node tier sets: the webhook with our certificate, leader election on (the
# Lease is part of what is checked), the model cache on (the seed guide's Models use it).
NODE_VALUES: Obj = {
    "webhook": {"certManager": {"enabled": False}, "certSecretName": WEBHOOK_SECRET},
    "leaderElection": {"enabled": True},
}


class HelmError(RuntimeError):
    pass


@dataclass
class Helm:
    binary: Path
    cluster: KubeCluster
    workdir: Path

    def run(self, *args: str, timeout: float = 300) -> str:
        done = subprocess.run(
            [str(self.binary), *args, "--kubeconfig", str(self.cluster.admin_kubeconfig)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={
                "HOME": str(self.workdir),
                "HELM_CACHE_HOME": str(self.workdir / "cache"),
                "HELM_CONFIG_HOME": str(self.workdir / "config"),
                "HELM_DATA_HOME": str(self.workdir / "data"),
                "PATH": "/usr/bin:/bin",
            },
        )
        if done.returncode != 0:
            raise HelmError(f"helm {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
        return done.stdout

    def values_file(self, values: Obj, name: str = "values.yaml") -> Path:
        path = self.workdir / name
        path.write_text(yaml.safe_dump(values))
        return path

    def install(self, values: Obj) -> str:
        return self.run(
            "install",
            RELEASE,
            str(CHART),
            "--namespace",
            NAMESPACE,
            "--create-namespace",
            "--values",
            str(self.values_file(values)),
            "--wait",
            "--timeout",
            "4m",
        )

    def upgrade(self, values: Obj) -> str:
        return self.run(
            "upgrade",
            RELEASE,
            str(CHART),
            "--namespace",
            NAMESPACE,
            "--values",
            str(self.values_file(values, "upgrade.yaml")),
            "--wait",
            "--timeout",
            "4m",
        )

    def history(self) -> list[Obj]:
        out: list[Obj] = json.loads(
            self.run("history", RELEASE, "--namespace", NAMESPACE, "--output", "json")
        )
        return out

    def release_values(self) -> Obj:
        out: Obj = json.loads(
            self.run("get", "values", RELEASE, "--namespace", NAMESPACE, "--output", "json")
        )
        return out


def webhook_values(cluster: KubeCluster) -> Obj:
    """The chart's values for the webhook served from the pod: a serving certificate for
    the webhook Service's names (signed by the cluster's CA), stored as the TLS Secret
    the chart mounts, and that CA as the caBundle the apiserver checks it with."""
    names = tuple(f"{RELEASE}.{NAMESPACE}.{suffix}" for suffix in ("svc", "svc.cluster.local"))
    crt, key = cluster.pki.issue("llmkube-webhook", names[0], server=True, dns=names)
    if not cluster._exists(f"/api/v1/namespaces/{NAMESPACE}"):
        cluster.http("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": WEBHOOK_SECRET, "namespace": NAMESPACE},
        "data": {
            "tls.crt": base64.b64encode(crt.read_bytes()).decode(),
            "tls.key": base64.b64encode(key.read_bytes()).decode(),
        },
    }
    cluster.apply(secret, manager="test")
    ca = base64.b64encode(cluster.pki.ca.read_bytes()).decode()
    return {**NODE_VALUES, "webhook": {**NODE_VALUES["webhook"], "caBundle": ca}}
