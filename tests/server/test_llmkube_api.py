"""LLMKube's manifests, unchanged: the CRDs store every field, api/ accepts them, and the
committed CRDs are exactly what api/ generates.

tests/data/llmkube-samples/ holds the in-scope files of LLMKube's config/samples/
(Model and InferenceService documents; Apache-2.0, LICENSE beside them).

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_llmkube_api.py.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.manifests import CRD_DIR
from tests.support.paths import DATA
from testserver.process import ApiServerProcess

SAMPLES = DATA / "llmkube-samples"
IN_SCOPE = ("Model", "InferenceService", "GPUQuota")


async def kubectl(server: str, *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        "--server",
        server,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


def contains(stored: Any, sent: Any) -> bool:
    """Every field sent is stored with its value (defaults may add more)."""
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(
            k in stored and contains(stored[k], v) for k, v in sent.items()
        )
    if isinstance(sent, list):
        return (
            isinstance(stored, list)
            and len(stored) == len(sent)
            and all(contains(a, b) for a, b in zip(stored, sent, strict=True))
        )
    return bool(stored == sent)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
async def test_kubectl_round_trip_keeps_every_field(
    apiserver: ApiServerProcess, tmp_path: Path
) -> None:
    code, out = await kubectl(apiserver.url, "apply", "--validate=false", "-f", str(CRD_DIR))
    assert code == 0, out
    files = [SAMPLES / "vllm-v0.20-smoke.yaml", DATA / "all-fields.yaml"]
    for i, path in enumerate(files):
        ns = f"round-trip-{i}"
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") in IN_SCOPE]
        for d in docs:
            d["metadata"]["namespace"] = ns
        manifest = tmp_path / f"{i}.json"
        manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
        code, out = await kubectl(apiserver.url, "apply", "--validate=false", "-f", str(manifest))
        assert code == 0, out
        for d in docs:
            resource = f"{d['kind'].lower()}s.inference.llmkube.dev/{d['metadata']['name']}"
            code, out = await kubectl(apiserver.url, "get", "-n", ns, resource, "-o", "json")
            assert code == 0, out
            assert contains(json.loads(out)["spec"], d["spec"]), (path.name, d["kind"])
