"""Model delivery on the simulated cluster: the cache PVC, the loaders' reports in the
Model's status, sha256, prefetch Jobs, files/mmproj and the HF token."""

from __future__ import annotations

import json

import pytest

from api import InvalidSpec, parse_inference_service, parse_model
from app.manifests import apply_text
from controller.kube import KubeClient
from controller.resources import DEPLOYMENT, JOB, PERSISTENT_VOLUME_CLAIM
from controller.resources import MODEL as MODEL_RT
from objtypes import Obj
from reconcilers.inferenceservice.scope import scope_for
from reconcilers.inferenceservice.workload import pod_spec
from reconcilers.model.delivery import delivery
from reconcilers.settings import CacheSettings
from reconcilers.sources.loader import LOADER_NAME
from testserver.loader_sim import simulated_sha256

from .conftest import condition, eventually, isvc_yaml
from .support.delivery import cluster_with_cache, loader_reports, model_phase

URL = "https://models.example/q/qwen-q4.gguf"


def model(name: str, source: str = URL, extra: str = "") -> str:
    return f"""
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {{name: {name}}}
spec:
  source: {source}
{extra}"""


async def deployment(kube: KubeClient, name: str) -> Obj:
    async def probe() -> Obj | None:
        return await kube.get(DEPLOYMENT, "default", name)

    return await eventually(probe, what=f"Deployment {name}")


@pytest.mark.server
async def test_two_replicas_share_one_download_through_the_cache_pvc() -> None:
    async with cluster_with_cache() as (kube, _, _s):
        await apply_text(kube, model("m", extra=f"  sha256: {simulated_sha256(URL).upper()}"))
        m = await model_phase(kube, "m", "Pending")
        key = m["status"]["cacheKey"]
        assert condition(m, "Ready")["reason"] == "DownloadPending"  # type: ignore[index]
        await apply_text(kube, isvc_yaml("s", "m", "llamacpp", "  replicas: 2"))
        m = await model_phase(kube, "m", "Ready")
        path = f"/models/{key}/qwen-q4.gguf"
        assert {k: m["status"][k] for k in ("path", "cacheKey", "sha256", "stagedFiles")} == {
            "path": path,
            "cacheKey": key,
            "sha256": simulated_sha256(URL),
            "stagedFiles": ["qwen-q4.gguf"],
        }
        assert int(m["status"]["size"]) > 0
        assert condition(m, "Ready")["reason"] == "ModelCached"  # type: ignore[index]
        # One loader downloaded, the other replica's found the file in the shared cache.
        reports = await loader_reports(kube, "s", 2)
        assert sorted(len(r["downloaded"]) for r in reports) == [0, 1]
        pvc = await kube.get(PERSISTENT_VOLUME_CLAIM, "default", "llmkube-model-cache")
        assert pvc is not None and "ownerReferences" not in pvc["metadata"]
        assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"]
        assert pvc["spec"]["resources"]["requests"]["storage"] == "100Gi"
        pod = (await deployment(kube, "s"))["spec"]["template"]["spec"]
        assert pod["volumes"][0] == {
            "name": "model-cache",
            "persistentVolumeClaim": {"claimName": "llmkube-model-cache"},
        }
        mount = pod["containers"][0]["volumeMounts"][0]
        assert mount == {"name": "model-cache", "mountPath": "/models", "readOnly": True}
        assert pod["containers"][0]["args"][1] == path


@pytest.mark.server
async def test_sha256_mismatch_fails_the_model_and_the_file_is_not_used() -> None:
    async with cluster_with_cache() as (kube, _, _s):
        await apply_text(kube, model("m", extra=f"  sha256: '{'0' * 64}'"))
        await apply_text(kube, isvc_yaml("s", "m", "llamacpp"))
        m = await model_phase(kube, "m", "Failed")
        ready = condition(m, "Ready")
        assert ready is not None and ready["reason"] == "IntegrityCheckFailed"
        assert ready["message"] == (
            f"spec.sha256: qwen-q4.gguf has sha256 {simulated_sha256(URL)}, expected "
            f"{'0' * 64}; the file was not used"
        )
        assert "path" not in m["status"]


@pytest.mark.server
async def test_a_running_loader_shows_downloading() -> None:
    async with cluster_with_cache() as (kube, _, _s):
        await apply_text(kube, model("m"))
        hold = '  podAnnotations: {"sim.llmkube.dev/loader-seconds": "3600"}'
        await apply_text(kube, isvc_yaml("s", "m", "llamacpp", hold))
        m = await model_phase(kube, "m", "Downloading")
        assert condition(m, "Ready")["reason"] == "DownloadStarted"  # type: ignore[index]


@pytest.mark.server
async def test_per_service_cache_is_owned_by_the_service_and_claim_name_wins() -> None:
    settings = CacheSettings(enabled=True, mode="perService", size="5Gi", storage_class="fast")
    async with cluster_with_cache(settings) as (kube, _, _s):
        await apply_text(kube, model("m"))
        await apply_text(kube, isvc_yaml("s", "m", "llamacpp"))

        async def claim() -> Obj | None:
            return await kube.get(PERSISTENT_VOLUME_CLAIM, "default", "s-model-cache")

        pvc = await eventually(claim, what="PVC s-model-cache")
        assert pvc["metadata"]["ownerReferences"][0]["name"] == "s"
        assert pvc["spec"] == {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "5Gi"}},
            "storageClassName": "fast",
        }
        await model_phase(kube, "m", "Ready")
        # spec.modelCache.claimName: the user's claim, never created by us.
        await apply_text(kube, isvc_yaml("own", "m", "llamacpp", "  modelCache: {claimName: mine}"))
        pod = (await deployment(kube, "own"))["spec"]["template"]["spec"]
        assert pod["volumes"][0]["persistentVolumeClaim"] == {"claimName": "mine"}
        assert await kube.get(PERSISTENT_VOLUME_CLAIM, "default", "own-model-cache") is None
        await apply_text(
            kube, isvc_yaml("eph", "m", "llamacpp", "  modelCache: {persistence: Ephemeral}")
        )
        pod = (await deployment(kube, "eph"))["spec"]["template"]["spec"]
        assert pod["volumes"][0] == {"name": "models", "emptyDir": {}}


@pytest.mark.server
async def test_prefetch_job_fills_the_shared_cache_before_any_service() -> None:
    async with cluster_with_cache() as (kube, _, _s):
        tolerations = "  prefetch: true\n  prefetchTolerations: [{key: gpu, operator: Exists}]"
        await apply_text(kube, model("m", extra=tolerations))
        m = await model_phase(kube, "m", "Ready")
        prefetch = condition(m, "Prefetch")
        assert prefetch is not None and prefetch["reason"] == "PrefetchComplete"
        jobs, _ = await kube.list(JOB, "default")
        assert len(jobs) == 1
        job = jobs[0]
        assert job["metadata"]["ownerReferences"][0]["kind"] == "Model"
        pod = job["spec"]["template"]["spec"]
        assert pod["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
        assert pod["volumes"] == [
            {"name": "model-cache", "persistentVolumeClaim": {"claimName": "llmkube-model-cache"}}
        ]
        # The service's loader then finds the file in the cache.
        await apply_text(kube, isvc_yaml("s", "m", "llamacpp"))
        (report,) = await loader_reports(kube, "s", 1)
        assert report["downloaded"] == [] and report["stagedFiles"] == ["qwen-q4.gguf"]


@pytest.mark.server
async def test_prefetch_without_the_shared_cache_says_so() -> None:
    async with cluster_with_cache(CacheSettings(enabled=False)) as (kube, _, _s):
        await apply_text(kube, model("m", extra="  prefetch: true"))

        async def said() -> Obj | None:
            m = await kube.get(MODEL_RT, "default", "m")
            c = condition(m, "Prefetch")
            return m if c and c["reason"] == "PrefetchNeedsSharedCache" else None

        await eventually(said, what="Prefetch=False PrefetchNeedsSharedCache")
        assert (await kube.list(JOB, "default"))[0] == []


@pytest.mark.server
async def test_files_and_mmproj_are_staged_and_passed_to_llamacpp() -> None:
    async with cluster_with_cache() as (kube, _, _s):
        files = "  files: [q4/model.gguf, tokenizer.json]\n  mmproj: mmproj-f16.gguf"
        await apply_text(kube, model("m", "hf://org/vision-GGUF@v2", files))
        await apply_text(kube, isvc_yaml("s", "m", "llamacpp"))
        m = await model_phase(kube, "m", "Ready")
        key = m["status"]["cacheKey"]
        assert m["status"]["stagedFiles"] == ["q4/model.gguf", "tokenizer.json", "mmproj-f16.gguf"]
        assert m["status"]["path"] == f"/models/{key}/q4/model.gguf"
        assert m["status"]["sha256"] == simulated_sha256(
            "https://huggingface.co/org/vision-GGUF/resolve/v2/q4/model.gguf"
        )
        args = (await deployment(kube, "s"))["spec"]["template"]["spec"]["containers"][0]["args"]
        assert args[args.index("--model") + 1] == f"/models/{key}/q4/model.gguf"
        assert args[args.index("--mmproj") + 1] == f"/models/{key}/mmproj-f16.gguf"
        assert "-hf" not in args


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
