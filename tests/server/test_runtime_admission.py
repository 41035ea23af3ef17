"""tensorSplit at admission: the webhook (our parse) and the CRD schema (maxItems).

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_runtime_admission.py.
"""

from __future__ import annotations

import pytest

from controller.errors import ApiError
from controller.kube import KubeClient
from controller.resources import MODEL
from tests.support.webhook import ca, webhook

__all__ = ["ca", "webhook"]  # the fixtures, used by name


async def test_crd_schema_caps_layer_split_without_the_webhook(kube: KubeClient) -> None:
    gpu = {"enabled": True, "count": 2, "sharding": {"layerSplit": [f"{i}-{i}" for i in range(16)]}}
    model = {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "Model",
        "metadata": {"name": "m", "namespace": "default"},
        "spec": {"source": "/m.gguf", "hardware": {"accelerator": "cuda", "gpu": gpu}},
    }
    with pytest.raises(ApiError) as e:
        await kube.create(MODEL, model)
    assert e.value.status == 422
    assert "layerSplit" in str(e.value)
