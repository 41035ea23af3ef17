"""The loader's shell script, run for real (sh, curl, sha256sum) against a local HTTP server:
download, sha256 match and mismatch, resume, cache reuse, OnChange revalidation, the
termination message it writes, and hostile input (issue 27 items 1-4): a source with
newlines or a leading '-', two loaders racing on one folder, a poisoned cache, a
redirect from https to http.

Every test runs once under the machine's sh with its coreutils and, where busybox is
installed, once under busybox's sh and applets (what curlimages/curl has).

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_loader_script.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.manifests import apply_text
from controller.resources import DEPLOYMENT
from tests.support.dra_cluster import dra_cluster
from tests.support.loader_script import (
    BODY,
    EVIL,
    EVIL_SUM,
    SUM,
    Origin,
    _serve,
    _tls,
    run,
)
from tests.support.waiting import eventually

# -- --hf-endpoint: a local https hub, the controller's own loader --------------------


def _pod_env(container: dict[str, Any], secrets: dict[tuple[str, str], str]) -> dict[str, str]:
    """The env the kubelet gives the container: values, and secretKeyRefs from `secrets`."""
    env = {}
    for e in container["env"]:
        if "value" in e:
            env[e["name"]] = e["value"]
        ref = (e.get("valueFrom") or {}).get("secretKeyRef")
        if ref and (ref["name"], ref["key"]) in secrets:
            env[e["name"]] = secrets[ref["name"], ref["key"]]
    return env


@pytest.mark.server
async def test_a_hub_download_from_the_configured_endpoint_is_checked_and_keeps_the_token(
    tmp_path: Path,
) -> None:
    """The controller runs with --hf-endpoint at a local https hub (a stand-in for
    huggingface.co: it answers `resolve` with a 302 to its CDN and X-Linked-Etag, as the
    hub does for LFS files). The loader the controller puts in the pod downloads from
    it, sends HF_TOKEN to it alone (not to the CDN, another host), checks the file
    against the hub's digest, and refuses a CDN that serves other bytes."""
    context, ca = _tls(tmp_path)
    hub, cdn = Origin(), Origin()
    for hub_url in _serve(hub, context):
        for cdn_url in _serve(cdn, context):
            hub.redirects["/org/repo/resolve/main/m.gguf"] = f"{cdn_url}/lfs/m.gguf"
            hub.linked["/org/repo/resolve/main/m.gguf"] = f'"{SUM}"'
            cdn.files["/lfs/m.gguf"] = BODY
            async with dra_cluster(gpus=0, plugin=0, hf_endpoint=hub_url) as (kube, _, _s):
                await apply_text(
                    kube,
                    """
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {name: m}
spec:
  source: hf://org/repo/m.gguf
  sourceSecretRef: {name: hf}
---
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata: {name: s}
spec: {modelRef: m, runtime: llamacpp}
""",
                )

                async def loader() -> dict[str, Any] | None:
                    dep = await kube.get(DEPLOYMENT, "default", "s")
                    pod = dep["spec"]["template"]["spec"] if dep else {}
                    found = [
                        c for c in pod.get("initContainers") or [] if c["name"] == "model-loader"
                    ]
                    return found[0] if found else None

                container = await eventually(loader, what="the Deployment's loader")
            env = _pod_env(container, {("hf", "HF_TOKEN"): "hf_secret"})
            env["CURL_CA_BUNDLE"] = ca
            rc, msg, out = run(tmp_path, env)
            assert rc == 0, out
            assert msg["files"] == [
                {"name": "m.gguf", "size": len(BODY), "sha256": SUM, "digestSource": "hub"}
            ]
            assert hub.auth == [("/org/repo/resolve/main/m.gguf", "Bearer hf_secret")]
            assert cdn.auth == [("/lfs/m.gguf", None)]
            # The CDN serves other bytes than the hub published: nothing is staged.
            cdn.files["/lfs/m.gguf"] = EVIL
            (tmp_path / "models/m.gguf").unlink()
            rc, msg, out = run(tmp_path, env, pod="pod-b")
            assert rc == 1 and msg["error"] == "Sha256Mismatch", out
            assert msg["expectedFrom"] == "hub" and msg["actual"] == EVIL_SUM
            assert not (tmp_path / "models/m.gguf").exists()
