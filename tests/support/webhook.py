"""The validating webhook served over HTTPS for tests, and AdmissionReview bodies to post."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import trustme

from app.manifests import EXAMPLES, load
from objtypes import Obj
from webhook.server import PATH, WebhookServer, start_webhook


def write_serving_cert(ca: trustme.CA, cert_dir: Path) -> None:
    """A webhook serving certificate for 127.0.0.1 from ca, as tls.crt / tls.key."""
    cert = ca.issue_cert("localhost", "127.0.0.1")
    cert.private_key_pem.write_to_path(str(cert_dir / "tls.key"))
    cert.cert_chain_pems[0].write_to_path(str(cert_dir / "tls.crt"))


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
async def webhook(ca: trustme.CA, tmp_path: Path) -> AsyncIterator[WebhookServer]:
    write_serving_cert(ca, tmp_path)
    models = {("default", "qwen3-32b"): seed_model()}
    server = await start_webhook(
        str(tmp_path), 0, host="127.0.0.1", lookup=lambda ns, name: models.get((ns, name))
    )
    yield server
    await server.cleanup()


async def post(
    server: WebhookServer, ca: trustme.CA, body: bytes | str, content_type: str = "application/json"
) -> tuple[int, Obj]:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    data = body.encode() if isinstance(body, str) else body
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            f"https://127.0.0.1:{server.port}{PATH}",
            data=data,
            ssl=context,
            headers={"Content-Type": content_type},
        ) as r,
    ):
        return r.status, await r.json()


def admission_request(kind: str, spec: Obj, name: str = "svc") -> Obj:
    """The `request` of an AdmissionReview creating one of our objects, as verdict() reads it."""
    return {
        "uid": "1",
        "operation": "CREATE",
        "namespace": "default",
        "kind": {"group": "inference.llmkube.dev", "version": "v1alpha1", "kind": kind},
        "object": {"metadata": {"name": name}, "spec": spec},
    }


def admission_review(obj: Obj | None, operation: str = "CREATE", old: Obj | None = None) -> str:
    kind = (obj or old or {}).get("kind", "Model")
    plural = {"Model": "models", "InferenceService": "inferenceservices", "GPUQuota": "gpuquotas"}[
        kind
    ]
    name = (obj or old or {}).get("metadata", {}).get("name", "x")
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": "inference.llmkube.dev", "version": "v1alpha1", "kind": kind},
                "resource": {
                    "group": "inference.llmkube.dev",
                    "version": "v1alpha1",
                    "resource": plural,
                },
                "requestKind": {
                    "group": "inference.llmkube.dev",
                    "version": "v1alpha1",
                    "kind": kind,
                },
                "name": name,
                "namespace": "default",
                "operation": operation,
                "userInfo": {"username": "admin", "groups": ["system:authenticated"]},
                "object": obj,
                "oldObject": old,
                "dryRun": False,
                "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
            },
        }
    )


def seed_model() -> Obj:
    docs = load((EXAMPLES / "multi-gpu.yaml").read_text())
    return next(d for d in docs if d["kind"] == "Model")


def with_gpu(**gpu: Any) -> Obj:
    model = seed_model()
    model["spec"]["hardware"]["gpu"].update(gpu)
    return model
