"""Specs whose pod would start and then do something else than asked (issue 34): a bare
source that names a file, llama.cpp's --host on a UNIX socket, SGLang's parallel sizes
that its argument resolution asserts on; and every staged file pinned (spec.fileDigests)
and reported with its digest's source (status.files). Each is refused (or reported)
before a pod exists, naming the field, the value and what would be accepted.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_starts_right.py.
"""

from __future__ import annotations

import hashlib

import pytest

from app.manifests import apply_text
from controller.errors import ApiError
from controller.kube import KubeClient
from controller.manager import Manager
from controller.resources import DEPLOYMENT, INFERENCE_SERVICE, MODEL
from tests.support.delivery import cluster_with_cache, model_phase
from tests.support.manifests import isvc_yaml, reapply
from tests.support.waiting import condition, wait_condition
from testserver.loader_sim import simulated_sha256


@pytest.mark.server
async def test_a_model_whose_bare_source_names_a_file_is_failed_and_never_served(
    kube: KubeClient, controller: Manager
) -> None:
    await apply_text(kube, model_text("bare", "", source="models/qwen.gguf"))
    await apply_text(kube, isvc_yaml("bare", "bare", "llamacpp"))
    m = await wait_condition(kube, MODEL, "bare", "AcceleratorReady", "False", "InvalidSpec")
    message = condition(m, "AcceleratorReady")["message"]  # type: ignore[index]
    assert "hf://owner/repo/path/file.gguf" in message and m["status"]["phase"] == "Failed"
    await wait_condition(kube, INFERENCE_SERVICE, "bare", "Ready", "False")
    assert await kube.get(DEPLOYMENT, "default", "bare") is None


@pytest.mark.server
async def test_a_socket_host_gets_a_condition_and_no_deployment(
    kube: KubeClient, controller: Manager
) -> None:
    await reapply(kube, model_text("tiny", "", source="https://h/m/tiny.gguf"))
    await reapply(
        kube, isvc_yaml("sock", "tiny", "llamacpp", '  extraArgs: ["--host", "/tmp/l.sock"]')
    )
    isvc = await wait_condition(
        kube, INFERENCE_SERVICE, "sock", "RuntimeConfigured", "False", "InvalidRuntimeConfig"
    )
    said = condition(isvc, "RuntimeConfigured")["message"]  # type: ignore[index]
    assert said.startswith("spec.extraArgs[1]: --host '/tmp/l.sock' ends in '.sock'"), said
    assert await kube.get(DEPLOYMENT, "default", "sock") is None


MULTI = {"source": "org/repo", "files": ["m-1.gguf", "m-2.gguf"], "mmproj": "proj.gguf"}


@pytest.mark.server
async def test_the_crd_refuses_a_file_digest_that_is_not_64_hex_digits(kube: KubeClient) -> None:
    for i, sha in enumerate(["a" * 63, "g" * 64, "a" * 65]):
        bad = {
            "apiVersion": "inference.llmkube.dev/v1alpha1",
            "kind": "Model",
            "metadata": {"name": f"digest-{i}", "namespace": "default"},
            "spec": {**MULTI, "fileDigests": [{"file": "m-2.gguf", "sha256": sha}]},
        }
        with pytest.raises(ApiError) as e:
            await kube.create(MODEL, bad)
        assert e.value.status == 422 and "sha256" in e.value.message, e.value.message


# -- 2. status.files: each file, its digest and who vouches for it -----------------------

HUB = "https://huggingface.co/org/repo/resolve/main"


@pytest.mark.server
async def test_the_model_status_lists_each_file_with_its_digest_source() -> None:
    pins = f"""  files: [m-1.gguf, m-2.gguf]
  mmproj: proj.gguf
  fileDigests:
    - {{file: proj.gguf, sha256: {simulated_sha256(f"{HUB}/proj.gguf")}}}"""
    async with cluster_with_cache() as (kube, _, _s):
        await apply_text(kube, model_text("m", pins))
        await apply_text(kube, isvc_yaml("s", "m", "llamacpp"))
        m = await model_phase(kube, "m", "Ready")
        files = {f["name"]: f for f in m["status"]["files"]}
        assert {n: f["digestSource"] for n, f in files.items()} == {
            "m-1.gguf": "hub",
            "m-2.gguf": "hub",
            "proj.gguf": "spec",
        }
        for name, f in files.items():
            assert f["sha256"] == simulated_sha256(f"{HUB}/{name}") and f["size"] > 0


@pytest.mark.server
async def test_a_pinned_projector_with_another_digest_fails_naming_it() -> None:
    wrong = hashlib.sha256(b"the projector the owner pinned").hexdigest()
    pins = f"""  files: [m-1.gguf]
  mmproj: proj.gguf
  fileDigests: [{{file: proj.gguf, sha256: {wrong}}}]"""
    async with cluster_with_cache() as (kube, _, _s):
        await apply_text(kube, model_text("m", pins))
        await apply_text(kube, isvc_yaml("s", "m", "llamacpp"))
        m = await model_phase(kube, "m", "Failed")
        ready = condition(m, "Ready")
        assert ready is not None and ready["reason"] == "IntegrityCheckFailed"
        assert ready["message"] == (
            f"spec.fileDigests: proj.gguf has sha256 {simulated_sha256(f'{HUB}/proj.gguf')}, "
            f"expected {wrong}; the file was not used"
        )


def model_text(name: str, extra: str, source: str = "org/repo") -> str:
    """A Model manifest; extra is more YAML under spec, indented 2."""
    return f"""
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {{name: {name}}}
spec:
  source: {source}
{extra}"""
