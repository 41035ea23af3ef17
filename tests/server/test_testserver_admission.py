"""Validating admission: the server calls registered webhooks over TLS (AdmissionReview v1).

End to end with the chart's own ValidatingWebhookConfiguration and the repo's webhook
server; the service reference is replaced by a URL since a test process has no Services.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trustme
import yaml
from aiohttp import web

from controller.kube import KubeClient
from objtypes import Obj
from tests.support.chart import find, render
from tests.support.manifests import TWO_GPU_CLAIMS, isvc_yaml, model_yaml
from tests.support.server_contract import call, kubectl
from tests.support.webhook import write_serving_cert
from testserver.process import ApiServerProcess
from webhook.server import PATH, WebhookServer, start_webhook

HOOKS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
MODELS = "/apis/inference.llmkube.dev/v1alpha1/namespaces/{ns}/models"
SERVICES = "/apis/inference.llmkube.dev/v1alpha1/namespaces/{ns}/inferenceservices"


@pytest.fixture
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
async def webhook(ca: trustme.CA, tmp_path: Path) -> AsyncIterator[WebhookServer]:
    write_serving_cert(ca, tmp_path)
    # The Model the bad service names: it has claims (the webhook's cross-object rule).
    dra_model = yaml.safe_load(model_yaml("dra", TWO_GPU_CLAIMS))
    server = await start_webhook(
        str(tmp_path),
        0,
        host="127.0.0.1",
        lookup=lambda ns, name: dra_model if name == "dra" else None,
    )
    yield server
    await server.cleanup()


def ca_bundle(ca: trustme.CA) -> str:
    return base64.b64encode(ca.cert_pem.bytes()).decode()


def chart_config(url: str, bundle: str, **hook_changes: Any) -> Obj:
    """The chart's ValidatingWebhookConfiguration, pointed at url."""
    config = copy.deepcopy(find(render({}), "ValidatingWebhookConfiguration"))
    for hook in config["webhooks"]:
        hook["clientConfig"] = {"url": url, "caBundle": bundle}
        hook.update(hook_changes)
    return config


MULTI_NODE = """\
  multiNode:
    members:
      - {node: a, fabric: {address: 10.0.0.1}}
      - {node: b}"""


def bad_service(name: str) -> str:
    """Valid for the CRD schema, denied by the webhook (a guide rule: DRA is single-node):
    a multiNode InferenceService whose Model ("dra") has claims."""
    return isvc_yaml(name, "dra", extra=MULTI_NODE)


async def register(apiserver: ApiServerProcess, config: Obj) -> None:
    status, body = await call(apiserver.url, "POST", HOOKS, config)
    assert status == 201, body


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_kubectl_apply_denied_by_the_charts_webhook(
    kube: KubeClient, apiserver: ApiServerProcess, webhook: WebhookServer, ca: trustme.CA
) -> None:
    url = f"https://127.0.0.1:{webhook.port}{PATH}"
    config = chart_config(url, ca_bundle(ca))
    await register(apiserver, config)
    code, out = await kubectl(
        apiserver.url, "apply", "-n", "default", "-f", "-", stdin=bad_service("b")
    )
    assert code != 0
    name = config["webhooks"][0]["name"]
    assert f'admission webhook "{name}" denied the request' in out, out
    assert "single-node" in out
    status, _ = await call(apiserver.url, "GET", SERVICES.format(ns="default") + "/b")
    assert status == 404
    good = model_yaml("g", "      enabled: true\n      count: 1")
    code, out = await kubectl(apiserver.url, "apply", "-n", "default", "-f", "-", stdin=good)
    assert code == 0, out


async def test_namespace_selector_and_operations(
    kube: KubeClient, apiserver: ApiServerProcess, webhook: WebhookServer, ca: trustme.CA
) -> None:
    url = f"https://127.0.0.1:{webhook.port}{PATH}"
    config = chart_config(
        url, ca_bundle(ca), namespaceSelector={"matchLabels": {"llmkube/validate": "on"}}
    )
    await register(apiserver, config)
    for ns, labels in (("checked", {"llmkube/validate": "on"}), ("free", {})):
        body = {"metadata": {"name": ns, "labels": labels}}
        assert (await call(apiserver.url, "POST", "/api/v1/namespaces", body))[0] == 201
    code, out = await kubectl(
        apiserver.url, "apply", "-n", "free", "-f", "-", stdin=bad_service("m")
    )
    assert code == 0, out  # not selected: never sent to the webhook
    code, out = await kubectl(
        apiserver.url, "apply", "-n", "checked", "-f", "-", stdin=bad_service("m")
    )
    assert code != 0 and "denied the request" in out, out


async def test_failure_policy_timeout_and_ca_bundle(
    kube: KubeClient, apiserver: ApiServerProcess, webhook: WebhookServer, ca: trustme.CA
) -> None:
    path = MODELS.format(ns="default")
    model = {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "Model",
        "metadata": {"name": "x"},
        "spec": {"source": "Qwen/Qwen3-8B"},
    }
    down = f"https://127.0.0.1:{closed_port()}{PATH}"
    config = chart_config(down, ca_bundle(ca), failurePolicy="Ignore")
    config["metadata"]["name"] = "ignore"
    await register(apiserver, config)
    status, body = await call(apiserver.url, "POST", path, model)
    assert status == 201, body  # Ignore: a webhook that cannot be reached admits
    await call(apiserver.url, "DELETE", f"{path}/x")

    wrong_ca = ca_bundle(trustme.CA())
    config = chart_config(f"https://127.0.0.1:{webhook.port}{PATH}", wrong_ca)
    config["metadata"]["name"] = "wrong-ca"
    await register(apiserver, config)
    status, body = await call(apiserver.url, "POST", path, model)
    assert status == 500 and body["reason"] == "InternalError", body
    assert 'failed calling webhook "' in body["message"]
    assert "certificate" in body["message"].lower()
    await call(apiserver.url, "DELETE", f"{HOOKS}/wrong-ca")

    # A webhook slower than its timeoutSeconds fails the request under Fail.
    async def slow(_: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/slow", slow)
    runner = web.AppRunner(app)
    await runner.setup()
    cert_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(cert_ctx)
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=cert_ctx)
    await site.start()
    try:
        port = runner.addresses[0][1]
        config = chart_config(f"https://127.0.0.1:{port}/slow", ca_bundle(ca), timeoutSeconds=1)
        config["metadata"]["name"] = "slow"
        await register(apiserver, config)
        status, body = await call(apiserver.url, "POST", path, model)
        assert status == 500 and "context deadline exceeded" in body["message"], body
    finally:
        await runner.cleanup()
