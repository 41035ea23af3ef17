"""The controller that devcluster/helm.py's `helm install` runs as a Pod on the real
node, seen through the apiserver: its pods, readiness and log."""

from __future__ import annotations

import time
import urllib.error

from devcluster import KubeCluster
from devcluster.helm import NAMESPACE as NAMESPACE
from devcluster.helm import RELEASE as RELEASE
from devcluster.helm import SELECTOR
from devcluster.helm import Helm as Helm
from devcluster.helm import webhook_values as webhook_values
from devcluster.objects import ready
from objtypes import Obj

from .kube_cluster import ControllerLog


class PodController(ControllerLog):
    """The controller as the chart's Deployment runs it; its log is read through the
    apiserver (the kubelet's log endpoint), and each restart's log is kept."""

    def __init__(self, cluster: KubeCluster) -> None:
        super().__init__()
        self.cluster = cluster

    def pods(self) -> list[Obj]:
        listed = self.cluster.http(
            "GET", f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector={SELECTOR}"
        )
        return [p for p in listed["items"] if not p["metadata"].get("deletionTimestamp")]

    def pod(self) -> Obj:
        running = [p for p in self.pods() if (p.get("status") or {}).get("phase") == "Running"]
        if len(running) != 1:
            raise AssertionError(f"{len(running)} controller pods running: {running}")
        return running[0]

    def log(self) -> str:
        text = ""
        for pod in sorted(self.pods(), key=lambda p: p["metadata"]["creationTimestamp"]):
            try:
                text += self.cluster.text(
                    f"/api/v1/namespaces/{NAMESPACE}/pods/{pod['metadata']['name']}/log"
                )
            except urllib.error.HTTPError:
                continue
        return text

    def wait_ready(self, timeout: float = 180) -> Obj:
        """One controller pod Ready, and the apiserver's admission calls reaching it
        through the Service: a pod turns Ready before kube-proxy has programmed its
        endpoint, and a user's first apply in between fails with "connection refused"."""
        deadline = time.monotonic() + timeout
        while True:
            pods = self.pods()
            serving = [p for p in pods if ready(p)]
            if len(serving) == 1 and len(pods) == 1:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"the controller pod never became Ready: {pods}")
            time.sleep(0.5)
        self.wait_admitting(deadline)
        return serving[0]

    def wait_admitting(self, deadline: float) -> None:
        """Until a dry-run create of a Model passes admission (the webhook, where the
        release installs one, answers through its Service)."""
        path = f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{NAMESPACE}/models?dryRun=All"
        probe = {
            "apiVersion": "inference.llmkube.dev/v1alpha1",
            "kind": "Model",
            "metadata": {"generateName": "admission-probe-"},
            "spec": {"source": "org/repo"},
        }
        while True:
            try:
                self.cluster.http("POST", path, probe)
                return
            except urllib.error.HTTPError as e:
                if "failed calling webhook" not in str(e) or time.monotonic() > deadline:
                    raise
            time.sleep(0.5)
