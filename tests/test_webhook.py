"""The validating webhook over HTTPS: AdmissionReview v1 bodies as the apiserver sends them."""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import trustme

from app.manifests import EXAMPLES, load
from webhook.server import PATH, WebhookServer, start_webhook

Obj = dict[str, Any]


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
async def webhook(ca: trustme.CA, tmp_path: Path) -> AsyncIterator[WebhookServer]:
    cert = ca.issue_cert("localhost", "127.0.0.1")
    cert.private_key_pem.write_to_path(str(tmp_path / "tls.key"))
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "tls.crt"))
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


async def test_seed_examples_are_admitted(webhook: WebhookServer, ca: trustme.CA) -> None:
    for example in ("single-gpu.yaml", "multi-gpu.yaml"):
        for doc in load((EXAMPLES / example).read_text()):
            if doc["apiVersion"].startswith("inference.llmkube.dev"):
                status, body = await post(webhook, ca, admission_review(doc))
                assert status == 200
                assert body["apiVersion"] == "admission.k8s.io/v1"
                assert body["kind"] == "AdmissionReview"
                assert body["response"] == {
                    "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                    "allowed": True,
                }


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"resourceName": "nvidia.com/gpu"},
            "spec.hardware.gpu: resourceClaims and resourceName are mutually exclusive",
        ),
        (
            {
                "resourceClaims": [
                    {"name": "g", "resourceClaimName": "c", "resourceClaimTemplateName": "t"}
                ]
            },
            "set exactly one of resourceClaimName and resourceClaimTemplateName",
        ),
        (
            {"resourceClaims": [{"name": "g"}]},
            "set exactly one of resourceClaimName and resourceClaimTemplateName",
        ),
    ],
)
async def test_rule_breaking_models_are_denied(
    webhook: WebhookServer, ca: trustme.CA, change: Obj, message: str
) -> None:
    status, body = await post(webhook, ca, admission_review(with_gpu(**change)))
    assert status == 200
    response = body["response"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    assert message in response["status"]["message"]


def seed_service(**spec: Any) -> Obj:
    return {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": "s", "namespace": "default"},
        "spec": {"modelRef": "qwen3-32b", "runtime": "vllm", **spec},
    }


@pytest.mark.parametrize("mode", ["partitioned", "shared"])
async def test_service_gpu_sharing_with_model_claims_denied(
    webhook: WebhookServer, ca: trustme.CA, mode: str
) -> None:
    sharing = {"gpuSharing": {"mode": mode, "profile": "1g.10gb"}}
    _, body = await post(webhook, ca, admission_review(seed_service(resources=sharing)))
    assert body["response"]["allowed"] is False
    assert (
        f"'{mode}' cannot be combined with resourceClaims"
        in (body["response"]["status"]["message"])
    )
    exclusive = {"gpuSharing": {"mode": "exclusive"}}
    _, body = await post(webhook, ca, admission_review(seed_service(resources=exclusive)))
    assert body["response"]["allowed"] is True


async def test_multinode_with_claims_denied(webhook: WebhookServer, ca: trustme.CA) -> None:
    members = [{"node": "a", "fabric": {"address": "10.0.0.1"}}, {"node": "b"}]
    service = seed_service(multiNode={"members": members})
    _, body = await post(webhook, ca, admission_review(service))
    assert body["response"]["allowed"] is False
    assert "run DRA models single-node" in body["response"]["status"]["message"]
    # Its Model not there yet: admitted; the reconciler reports it once the Model exists.
    service["spec"]["modelRef"] = "later"
    _, body = await post(webhook, ca, admission_review(service))
    assert body["response"]["allowed"] is True


async def test_updates_are_checked_and_deletes_pass(webhook: WebhookServer, ca: trustme.CA) -> None:
    good, bad = seed_model(), with_gpu(resourceName="nvidia.com/gpu")
    _, body = await post(webhook, ca, admission_review(bad, "UPDATE", old=good))
    assert body["response"]["allowed"] is False
    _, body = await post(webhook, ca, admission_review(None, "DELETE", old=bad))
    assert body["response"]["allowed"] is True


async def test_inference_service_and_quota(webhook: WebhookServer, ca: trustme.CA) -> None:
    isvc = {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": "s"},
        "spec": {"modelRef": "m", "runtime": "ollama"},
    }
    _, body = await post(webhook, ca, admission_review(isvc))
    assert body["response"]["allowed"] is False
    assert "'ollama' is not one of" in body["response"]["status"]["message"]
    quota = {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "GPUQuota",
        "metadata": {"name": "q"},
        "spec": {"gpuCount": -1, "namespaceRef": "default"},
    }
    _, body = await post(webhook, ca, admission_review(quota))
    assert body["response"]["status"]["message"] == "spec.gpuCount: must be at least 0, got -1"


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("{not json", "body is not JSON"),
        ("[1, 2]", "body must be a JSON object"),
        (
            '{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {}}',
            "expected an AdmissionReview of admission.k8s.io/v1",
        ),
        (
            '{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}',
            "request.uid is required",
        ),
        (
            '{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", '
            '"request": {"uid": 7}}',
            "request.uid is required",
        ),
        (b"\xff\xfe\x00garbage", "body is not JSON"),
    ],
)
async def test_malformed_reviews_get_400(
    webhook: WebhookServer, ca: trustme.CA, body: str | bytes, error: str
) -> None:
    status, answer = await post(webhook, ca, body)
    assert status == 400
    assert error in answer["error"]


async def test_malformed_object_is_denied_not_crashed(
    webhook: WebhookServer, ca: trustme.CA
) -> None:
    review = json.loads(admission_review(seed_model()))
    review["request"]["object"] = "a string"
    _, body = await post(webhook, ca, json.dumps(review))
    assert body["response"] == {
        "uid": review["request"]["uid"],
        "allowed": False,
        "status": {
            "code": 403,
            "reason": "Forbidden",
            "message": "request.object must be an object",
        },
    }
    review["request"]["object"] = {"kind": "Model", "spec": {"hardware": {"gpu": {"count": "two"}}}}
    _, body = await post(webhook, ca, json.dumps(review))
    assert "spec.hardware.gpu.count: must be a number" in body["response"]["status"]["message"]


async def test_wrong_content_type_is_refused(webhook: WebhookServer, ca: trustme.CA) -> None:
    status, _ = await post(webhook, ca, admission_review(seed_model()), content_type="text/plain")
    assert status == 415


async def test_plain_http_is_refused(webhook: WebhookServer) -> None:
    async with aiohttp.ClientSession() as s:
        with pytest.raises(aiohttp.ClientError):
            await s.post(f"http://127.0.0.1:{webhook.port}{PATH}", data=b"{}")


async def test_rotated_certificate_is_picked_up(
    webhook: WebhookServer, ca: trustme.CA, tmp_path: Path
) -> None:
    other = trustme.CA()
    cert = other.issue_cert("127.0.0.1")
    cert.private_key_pem.write_to_path(str(tmp_path / "tls.key"))
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "tls.crt"))
    os.utime(tmp_path / "tls.crt", (1e9, 2e9))
    assert webhook.reloader.reload()
    status, _ = await post(webhook, other, admission_review(seed_model()))
    assert status == 200
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await post(webhook, ca, admission_review(seed_model()))
