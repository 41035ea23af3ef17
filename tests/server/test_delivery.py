"""Model delivery on the simulated cluster: the cache PVC, the loaders' reports in the
Model's status, sha256, prefetch Jobs, files/mmproj and the HF token.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_delivery.py.
"""

from __future__ import annotations

import pytest

from app.manifests import apply_text
from controller.kube import KubeClient
from controller.resources import DEPLOYMENT, JOB, PERSISTENT_VOLUME_CLAIM
from controller.resources import MODEL as MODEL_RT
from objtypes import Obj
from reconcilers.settings import CacheSettings
from tests.support.delivery import cluster_with_cache, loader_reports, model_phase
from tests.support.manifests import isvc_yaml
from tests.support.waiting import condition, eventually
from testserver.loader_sim import simulated_sha256

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
