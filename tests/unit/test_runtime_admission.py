"""tensorSplit at admission: the webhook (our parse) and the CRD schema (maxItems).

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_runtime_admission.py.
"""

from __future__ import annotations

import pytest
import trustme

from objtypes import Obj
from tests.support.webhook import admission_review, ca, post, webhook, with_gpu
from webhook.server import WebhookServer

__all__ = ["ca", "webhook"]  # the fixtures, used by name


def isvc(extra_args: list[str], runtime: str = "llamacpp") -> Obj:
    return {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": "s"},
        "spec": {"modelRef": "qwen3-32b", "runtime": runtime, "extraArgs": extra_args},
    }


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--tensor-split", ""], "spec.extraArgs[1]: --tensor-split"),
        (["-ts", "a,b"], "spec.extraArgs[1]: -ts"),
        (["-ngl", "99", "-ts", ",".join(["1"] * 16)], "spec.extraArgs[3]: -ts: at most 15 parts"),
        (["--tensor-split=1,x"], "spec.extraArgs[0]: --tensor-split"),
    ],
)
async def test_webhook_denies_bad_tensor_split(
    webhook: WebhookServer, ca: trustme.CA, args: list[str], error: str
) -> None:
    _, body = await post(webhook, ca, admission_review(isvc(args)))
    assert body["response"]["allowed"] is False
    assert error in body["response"]["status"]["message"]


async def test_webhook_admits_good_tensor_split_and_other_runtimes(
    webhook: WebhookServer, ca: trustme.CA
) -> None:
    for review in (
        isvc(["-ts", "3,1"]),
        isvc(["--tensor-split", "1/1/2"]),
        isvc(["-tp", "2"], "vllm"),  # vLLM has no -ts: refused as an unknown option
    ):
        _, body = await post(webhook, ca, admission_review(review))
        assert body["response"]["allowed"] is True, body


async def test_webhook_denies_backwards_or_too_many_layer_ranges(
    webhook: WebhookServer, ca: trustme.CA
) -> None:
    for split, error in (
        (["0-19", "39-20"], "layerSplit[1]: '39-20': first layer after last layer"),
        ([f"{i}-{i}" for i in range(16)], "must have at most 15 items"),
    ):
        model = with_gpu(sharding={"layerSplit": split})
        _, body = await post(webhook, ca, admission_review(model))
        assert body["response"]["allowed"] is False
        assert error in body["response"]["status"]["message"]


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        (
            {"runtime": "vllm", "vllmConfig": {"kvCacheDtype": "int8"}},
            "spec.vllmConfig.kvCacheDtype",
        ),
        ({"runtime": "vllm", "extraArgs": ["--task", "embed"]}, "spec.extraArgs[0]: --task"),
        ({"runtime": "sglang", "extraArgs": ["--tp_size", "2"]}, "spec.extraArgs[0]: --tp_size"),
        ({"runtime": "tgi", "extraArgs": ["--host", "::"]}, "spec.extraArgs[0]: --host"),
        (
            {"runtime": "llamacpp", "extraArgs": ["--host", "127.0.0.1"]},
            "spec.extraArgs[1]: --host",
        ),
    ],
)
async def test_webhook_denies_what_the_pinned_runtime_exits_on(
    webhook: WebhookServer, ca: trustme.CA, spec: Obj, error: str
) -> None:
    review = isvc([])
    review["spec"] = {"modelRef": "qwen3-32b", **spec}
    _, body = await post(webhook, ca, admission_review(review))
    assert body["response"]["allowed"] is False
    assert error in body["response"]["status"]["message"]
