"""Model delivery on the simulated cluster: the cache PVC, the loaders' reports in the
Model's status, sha256, prefetch Jobs, files/mmproj and the HF token.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_delivery.py.
"""

from __future__ import annotations

import json
from copy import deepcopy

import pytest

from api import InvalidSpec, parse_inference_service, parse_model
from controller.informer import ADDED, DELETED, MODIFIED, Event
from objtypes import Obj
from reconcilers.inferenceservice.scope import scope_for
from reconcilers.inferenceservice.workload import pod_spec
from reconcilers.model.delivery import delivery, loader_changed
from reconcilers.sources.loader import LOADER_NAME

URL = "https://models.example/q/qwen-q4.gguf"


# -- the pod spec: HF token, refresh policy (no server) ---------------------------------


def _pod(runtime: str, model_spec: Obj, extra: Obj) -> Obj:
    isvc = {"metadata": {"name": "s", "namespace": "default", "uid": "u"}}
    service = parse_inference_service({"modelRef": "m", "runtime": runtime, **extra})
    return pod_spec(scope_for(isvc, service, parse_model(model_spec)))


def test_hf_token_secret_ref_reaches_the_runtime_as_a_secret_key_ref() -> None:
    ref = {"hfTokenSecretRef": {"name": "hf", "key": "token"}}
    want = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}
    for runtime, section in (("vllm", "vllmConfig"), ("sglang", "sglangConfig")):
        pod = _pod(runtime, {"source": "org/gated", "format": "safetensors"}, {section: ref})
        assert want in pod["containers"][0]["env"], runtime
    tgi = _pod("tgi", {"source": "org/gated", "format": "safetensors"}, {"tgiConfig": ref})
    names = [e["name"] for e in tgi["containers"][0]["env"] if "valueFrom" in e]
    assert names == ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"]
    # Another runtime's section is never read; no token, no env.
    other = _pod("vllm", {"source": "org/gated", "format": "safetensors"}, {"tgiConfig": ref})
    assert "HF_TOKEN" not in str(other)


def test_source_secret_ref_gives_the_hf_loader_its_token_and_no_other_host() -> None:
    spec = {"source": "hf://org/gated/m.gguf", "sourceSecretRef": {"name": "hf"}}
    loader = _pod("llamacpp", spec, {})["initContainers"][0]
    env = {e["name"]: e for e in loader["env"]}
    assert env["HF_TOKEN"]["valueFrom"] == {
        "secretKeyRef": {"name": "hf", "key": "HF_TOKEN", "optional": True}
    }
    assert env["LOADER_HF_AUTH"]["value"] == "1"
    other = {"source": "https://cdn.example/m.gguf", "sourceSecretRef": {"name": "hf"}}
    assert "HF_TOKEN" not in str(_pod("llamacpp", other, {})["initContainers"][0]["env"])


def test_refresh_policy_on_change_reaches_the_loader() -> None:
    spec = {"source": URL, "refreshPolicy": "OnChange"}
    env = {
        e["name"]: e.get("value") for e in _pod("llamacpp", spec, {})["initContainers"][0]["env"]
    }
    assert env["LOADER_REFRESH"] == "OnChange"
    plain = _pod("llamacpp", {"source": URL}, {})["initContainers"][0]["env"]
    assert "LOADER_REFRESH" not in str(plain)


def test_files_are_refused_where_no_loader_can_stage_them() -> None:
    with pytest.raises(InvalidSpec) as e:
        parse_model({"source": "pvc://c/m.gguf", "files": ["a.gguf"]})
    assert e.value.errors[0].startswith("spec.files: multi-file staging needs")
    s3 = {"source": "s3://bkt/q", "sourceSecretRef": {"name": "c"}, "files": ["a.gguf"]}
    env = {e["name"]: e.get("value") for e in _pod("llamacpp", s3, {})["initContainers"][0]["env"]}
    assert env["LOADER_URL_0"] == "bkt/q/a.gguf" and env["LOADER_FILE_0"] == "a.gguf"
    assert env["LOADER_S3"] == "1"
    with pytest.raises(InvalidSpec) as e:
        parse_model({"source": "org/r", "files": ["../x.gguf", "*.gguf"], "mmproj": "/abs"})
    assert [x.split(":")[0] for x in e.value.errors] == [
        "spec.files[0]",
        "spec.files[1]",
        "spec.mmproj",
    ]
    with pytest.raises(InvalidSpec) as e:
        parse_model({"source": "org/r", "mmproj": "mm.gguf"})
    assert e.value.errors == [
        "spec.mmproj: spec.files must name the primary model file (files[0]) too"
    ]


def test_a_loader_refusing_its_input_fails_the_model_as_invalid() -> None:
    """A Model stored before its source was checked never gets a loader (parse_model refuses
    it); should one run anyway, its BadTarget/BadSource report says so, not DownloadFailed."""
    spec = parse_model({"source": URL})
    report = {"cacheKey": spec.cache_key, "error": "BadTarget", "file": "../k/m.gguf"}
    terminated = {"exitCode": 1, "message": json.dumps(report)}
    pod = {
        "status": {
            "initContainerStatuses": [{"name": LOADER_NAME, "state": {"terminated": terminated}}]
        }
    }
    found = delivery(spec, [pod])
    assert (found.phase, found.reason) == ("Failed", "InvalidSpec")
    assert found.message.startswith("the loader refused '../k/m.gguf'")


# -- which pod events a Model reads (no server) -------------------------------------------


def _served_pod(**status: object) -> Obj:
    return {
        "metadata": {"name": "p", "namespace": "default", "labels": {"m": "x"}},
        "spec": {"initContainers": [{"name": LOADER_NAME}], "containers": [{"name": "vllm"}]},
        "status": {"phase": "Pending", **status},
    }


def test_a_model_is_woken_by_its_loaders_status_and_not_by_the_rest_of_the_pod() -> None:
    """The Model reads a pod's labels, spec (the loader's pins) and loader status; the
    runtime becoming Ready, the phase and the conditions move no Model (each woke every
    Model its pods name, once per pod update)."""
    loading = {"name": LOADER_NAME, "state": {"running": {}}}
    old = _served_pod(initContainerStatuses=[loading])

    def update(edit: object) -> bool:
        new = deepcopy(old)
        edit(new)  # type: ignore[operator]
        return loader_changed(Event(MODIFIED, new, old))

    def runtime_ready(p: Obj) -> None:
        p["status"]["phase"] = "Running"
        p["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        p["status"]["containerStatuses"] = [{"name": "vllm", "ready": True}]

    def loader_done(p: Obj) -> None:
        done = {"terminated": {"exitCode": 0, "message": "{}"}}
        p["status"]["initContainerStatuses"] = [{"name": LOADER_NAME, "state": done}]

    def bound(p: Obj) -> None:
        p["spec"]["nodeName"] = "n1"

    def relabelled(p: Obj) -> None:
        p["metadata"]["labels"]["m"] = "y"

    assert not update(runtime_ready)
    assert update(loader_done)
    assert update(bound)
    assert update(relabelled)
    assert loader_changed(Event(ADDED, old)) and loader_changed(Event(DELETED, old))
