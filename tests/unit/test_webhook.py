"""The validating webhook over HTTPS: AdmissionReview v1 bodies as the apiserver sends them."""

from __future__ import annotations

import asyncio
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
from objtypes import Obj
from tests.support.waiting import eventually
from tests.support.webhook import (
    admission_review,
    ca,
    post,
    seed_model,
    webhook,
    with_gpu,
    write_serving_cert,
)
from webhook.server import PATH, Limits, WebhookServer, start_webhook

__all__ = ["ca", "webhook"]  # the fixtures, shared with test_runtime_admission


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


# -- hardening: nothing a client does can hold the server's memory or connections ------


@pytest.fixture
async def strict_webhook(ca: trustme.CA, tmp_path: Path) -> AsyncIterator[WebhookServer]:
    write_serving_cert(ca, tmp_path)
    limits = Limits(handshake_timeout=0.5, header_timeout=0.5, body_timeout=0.5, max_connections=64)
    server = await start_webhook(str(tmp_path), 0, host="127.0.0.1", limits=limits)
    yield server
    await server.cleanup()


async def tls_connection(
    server: WebhookServer, ca: trustme.CA
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return await asyncio.open_connection("127.0.0.1", server.port, ssl=context)


async def closed_by_server(reader: asyncio.StreamReader, within: float = 10.0) -> bool:
    """True if the server closes the connection (EOF or reset) before `within` seconds."""
    try:
        while await asyncio.wait_for(reader.read(65536), within):
            pass
    except (ConnectionError, ssl.SSLError):
        return True
    except TimeoutError:
        return False
    return True


async def test_slow_headers_are_cut_off(strict_webhook: WebhookServer, ca: trustme.CA) -> None:
    reader, writer = await tls_connection(strict_webhook, ca)
    writer.write(f"POST {PATH} HTTP/1.1\r\nHost: x\r\n".encode())  # and never the rest
    assert await closed_by_server(reader), "a slowloris connection was kept open"
    writer.close()


async def test_a_connection_without_a_tls_handshake_is_closed(
    strict_webhook: WebhookServer,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", strict_webhook.port)
    assert await closed_by_server(reader)
    writer.close()


async def test_slow_bodies_get_408(strict_webhook: WebhookServer, ca: trustme.CA) -> None:
    reader, writer = await tls_connection(strict_webhook, ca)
    writer.write(
        f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: 100\r\n\r\n{".encode()
    )
    status_line = await asyncio.wait_for(reader.readline(), 10)
    assert status_line.split()[1] == b"408"
    writer.close()


async def test_oversized_and_deep_bodies_are_refused(
    webhook: WebhookServer, ca: trustme.CA
) -> None:
    status, _ = await post_raw(webhook, ca, b"{" + b" " * (3 * 1024 * 1024) + b"}")
    assert status == 413
    status, body = await post_raw(webhook, ca, b"[" * 100_000 + b"]" * 100_000)
    assert status == 400 and "deeper" in body
    deep = admission_review(seed_model())
    deep = deep.replace('"spec": {', '"spec": {"x": ' + "[" * 600 + "]" * 600 + ", ", 1)
    status, body = await post_raw(webhook, ca, deep.encode())
    assert status == 400, body


async def post_raw(server: WebhookServer, ca: trustme.CA, data: bytes) -> tuple[int, str]:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            f"https://127.0.0.1:{server.port}{PATH}",
            data=data,
            ssl=context,
            headers={"Content-Type": "application/json"},
        ) as r,
    ):
        return r.status, await r.text()


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def test_a_slowloris_flood_is_capped_and_drained(
    strict_webhook: WebhookServer, ca: trustme.CA
) -> None:
    """200 TLS connections sending headers slowly: capped at 64, all closed, memory back."""
    before = rss_mib()

    async def slow_client() -> bool:
        try:
            reader, writer = await tls_connection(strict_webhook, ca)
        except (ConnectionError, ssl.SSLError, OSError):
            return True  # refused at the cap
        try:
            writer.write(f"POST {PATH} HTTP/1.1\r\nHost: x\r\nX-Pad: ".encode() + b"a" * 8000)
            return await closed_by_server(reader)
        finally:
            writer.close()

    results = await asyncio.gather(*(slow_client() for _ in range(200)))
    peak = rss_mib()
    assert all(results), "some flood connections were never closed"
    await eventually(lambda: asyncio.sleep(0, strict_webhook.stats.open == 0), what="drain")
    stats = strict_webhook.stats
    assert stats.refused > 0, "the connection cap never applied"
    after = rss_mib()
    print(f"webhook flood: 200 slow TLS clients, RSS {before:.1f}/{peak:.1f}/{after:.1f} MiB")
    # The server still answers afterwards.
    status, _ = await post(strict_webhook, ca, admission_review(seed_model()))
    assert status == 200
