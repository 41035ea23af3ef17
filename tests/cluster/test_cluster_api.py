"""Our CRDs and every manifest a user is shown, on the real kube-apiserver.

The apiserver checks what our test server only imitates: a structural schema, CEL rules
that compile within their cost budget, and, on every write, the fields the schema does
not know (pruned in silence by default; here applied with fieldValidation=Strict, so an
unknown field fails the apply, and read back, so a field dropped any other way shows).
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import KubeCluster, object_path
from objtypes import Obj
from tests.support.paths import REPO

SAMPLES = REPO / "tests" / "data" / "llmkube-samples"
MANIFESTS = [
    *sorted(SAMPLES.glob("*.yaml")),
    *sorted((REPO / "examples").glob("*.yaml")),
    *sorted((REPO / "app" / "data" / "examples").glob("*.yaml")),
]
# Kinds of other projects' CRDs that samples show beside ours (KEDA's HTTP add-on).
FOREIGN_KINDS = frozenset({"HTTPScaledObject"})

# Starting the control plane and waiting on it take longer than the suite's 120 s default.
pytestmark = pytest.mark.timeout(600)


def _version(binary: Path) -> str:
    run = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    return run.stdout + run.stderr


def test_the_control_plane_is_the_pinned_releases(kube_cluster: KubeCluster) -> None:
    """The releases the tier promises (K8S_VERSION, default 1.34.4; etcd as that release's
    go.mod pins it; kwok 0.8.0), every component still running."""
    k8s = os.environ.get("K8S_VERSION", "1.34.4").removeprefix("v")
    assert kube_cluster.http("GET", "/version")["gitVersion"] == f"v{k8s}"
    for binary in ("kube-controller-manager", "kube-scheduler"):
        assert _version(kube_cluster.bin / binary).strip() == f"Kubernetes v{k8s}"
    # etcd: the release k8s.io/kubernetes's go.mod requires, asked of Go in the build module.
    pinned = subprocess.run(
        ["go", "list", "-m", "-f", "{{.Version}}", "go.etcd.io/etcd/server/v3"],
        cwd=kube_cluster.bin.parent / "src" / "kube",
        env={**os.environ, "GOPROXY": "off", "GOFLAGS": "-mod=mod"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    assert re.fullmatch(r"v3\.\d+\.\d+", pinned), pinned
    assert f"etcd Version: {pinned[1:]}\n" in _version(kube_cluster.bin / "etcd")
    assert _version(kube_cluster.bin / "kwok").startswith("kwok version v0.8.0 ")
    stopped = [n for n, c in kube_cluster.components.items() if not c.running()]
    assert not stopped, stopped


def test_generated_crds_are_structural_and_established(
    kube_cluster: KubeCluster, llmkube_crds: list[Obj]
) -> None:
    assert {c["spec"]["names"]["kind"] for c in llmkube_crds} == {
        "Model",
        "InferenceService",
        "GPUQuota",
    }
    for crd in llmkube_crds:
        conditions = {c["type"]: c for c in crd["status"]["conditions"]}
        assert conditions["Established"]["status"] == "True", crd["metadata"]["name"]
        assert conditions["NamesAccepted"]["status"] == "True", crd["metadata"]["name"]
        # A non-structural schema is served but flagged, and its CEL rules are not run.
        assert "NonStructuralSchema" not in conditions, conditions["NonStructuralSchema"]


def missing_fields(sent: Any, got: Any, path: str = "") -> list[str]:
    """Paths of what was sent and is not in the object read back (pruned or changed)."""
    if isinstance(sent, dict):
        if not isinstance(got, dict):
            return [f"{path or '.'}: sent a map, got {got!r}"]
        found: list[str] = []
        for key, value in sent.items():
            if key not in got:
                found.append(f"{path}.{key}")
            else:
                found += missing_fields(value, got[key], f"{path}.{key}")
        return found
    if isinstance(sent, list):
        if not isinstance(got, list) or len(got) != len(sent):
            return [f"{path}: sent {sent!r}, got {got!r}"]
        return [f for i, v in enumerate(sent) for f in missing_fields(v, got[i], f"{path}[{i}]")]
    return [] if sent == got else [f"{path}: sent {sent!r}, got {got!r}"]


def documents(path: Path) -> list[Obj]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_manifest_is_applied_and_read_back_with_no_field_pruned(
    kube_cluster: KubeCluster, llmkube_crds: list[Obj], namespace: str, manifest: Path
) -> None:
    applied = 0
    for doc in documents(manifest):
        if doc["kind"] in FOREIGN_KINDS:
            continue
        sent = copy.deepcopy(doc)
        sent["metadata"]["namespace"] = namespace
        got = kube_cluster.apply(sent)
        read_back = kube_cluster.http("GET", object_path(got))
        where = f"{manifest.name}: {doc['kind']} {doc['metadata']['name']}"
        if "spec" in doc:
            assert missing_fields(doc["spec"], read_back.get("spec")) == [], where
        if doc["kind"] == "Secret":  # stringData is written into data
            sent_keys = {*(doc.get("data") or {}), *(doc.get("stringData") or {})}
            assert sent_keys == set(read_back.get("data") or {}), where
        for meta in ("labels", "annotations"):
            assert (
                missing_fields(
                    doc["metadata"].get(meta) or {}, read_back["metadata"].get(meta) or {}
                )
                == []
            ), where
        applied += 1
    assert applied, f"{manifest.name} has no object of ours"
