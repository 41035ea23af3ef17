"""The Helm chart: rendered by Helm's own engine (helm-python-sdk, Helm v4), linted,
applied with kubectl (server dry run against the test API server) and validated
against Kubernetes' published JSON schemas.

With a helm binary the same rendering is: helm template llmkube charts/llmkube -n llmkube-system

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_chart.py.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.support.chart import CRD_DIR, VARIANTS, render
from testserver.process import ApiServerProcess

THIRD_PARTY_CRDS = [
    ("monitoring.coreos.com", "servicemonitors", "ServiceMonitor"),
    ("monitoring.coreos.com", "prometheusrules", "PrometheusRule"),
    # The test server serves no policy/v1: a stand-in for kubectl's plumbing only; the
    # PodDisruptionBudget's schema is checked by test_rendered_manifests_match_*.
    ("policy", "poddisruptionbudgets", "PodDisruptionBudget"),
    ("cert-manager.io", "issuers", "Issuer"),
    ("cert-manager.io", "certificates", "Certificate"),
]


@pytest.mark.server  # starts a test API server of its own
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
async def test_kubectl_applies_every_variant_in_a_server_dry_run(tmp_path: Path) -> None:
    server = await ApiServerProcess.start()
    try:
        crds = [
            {
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": f"{plural}.{group}"},
                "spec": {
                    "group": group,
                    "scope": "Namespaced",
                    "names": {"plural": plural, "kind": kind},
                    "versions": [{"name": "v1", "served": True, "storage": True}],
                },
            }
            for group, plural, kind in THIRD_PARTY_CRDS
        ]
        (tmp_path / "third-party-crds.json").write_text(
            json.dumps({"apiVersion": "v1", "kind": "List", "items": crds})
        )
        ok, out = await kubectl(server.url, "apply", "-f", str(tmp_path / "third-party-crds.json"))
        assert ok, out
        ok, out = await kubectl(server.url, "apply", "--dry-run=server", "-f", str(CRD_DIR))
        assert ok, out
        assert out.count("created (server dry run)") == 3
        for i, values in enumerate(VARIANTS):
            docs = render(values)
            path = tmp_path / f"variant-{i}.yaml"
            path.write_text(yaml.safe_dump_all(docs))
            ok, out = await kubectl(server.url, "apply", "--dry-run=server", "-f", str(path))
            assert ok, (values, out)
            assert out.count("created (server dry run)") == len(docs), out
    finally:
        await server.stop()


async def kubectl(server: str, *args: str) -> tuple[bool, str]:
    # kubectl's client-side schema check needs the apiserver's OpenAPI document, which the
    # test server does not serve; schemas are checked by test_rendered_manifests_* instead.
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        "--server",
        server,
        *args,
        "--validate=false",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    return proc.returncode == 0, out.decode()
