"""Serving pods hardened by default, over HTTP on the test server: LLMKube's security
contexts (the user's keys still win), no service-account token, the model-cache prep's
place and shape (tests/unit/test_cache_prep.py runs it for real), hostPath volumes in
extraVolumes only under the operator's host-path roots, and opaque fields nested
without bound refused.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_pod_hardening.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from api import parse_model
from app.controllers import reconcilers
from app.manifests import apply_text
from controller.kube import KubeClient
from controller.manager import Manager, ManagerConfig
from controller.resources import DEPLOYMENT, INFERENCE_SERVICE, JOB, MODEL, NAMESPACE
from objtypes import Obj
from reconcilers.model.prefetch import job_name
from reconcilers.pod_security import ENFORCE_LABEL
from reconcilers.settings import CacheSettings, Settings
from reconcilers.writes.apply import HASH_ANNOTATION
from tests.support.manifests import isvc_yaml
from tests.support.pod_hardening import host_volume, nested
from tests.support.waiting import condition, eventually, wait_condition

GGUF_MODEL = """
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {name: m}
spec: {source: "https://example.com/qwen3-8b-q4.gguf", format: gguf}
"""


def isvc(name: str, **spec: Any) -> Obj:
    return {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"modelRef": "m", "runtime": "llamacpp", **spec},
    }


async def deployment(kube: KubeClient, name: str) -> Obj:
    async def probe() -> Obj | None:
        return await kube.get(DEPLOYMENT, "default", name)

    return await eventually(probe, what=f"Deployment {name}")


async def test_a_deeply_nested_extra_volume_is_refused_naming_it_and_work_goes_on(
    kube: KubeClient, controller: Manager
) -> None:
    """400 levels (the API server and our informers decode up to 512) in an opaque
    field: refused with a condition naming the field, no Deployment, other services
    served. It used to be applied, then every reconcile's comparison raised
    RecursionError."""
    await apply_text(kube, GGUF_MODEL)
    volume = {"name": "deep", "emptyDir": {}, "x": nested(400)}
    await kube.create(INFERENCE_SERVICE, isvc("deep", extraVolumes=[volume]))
    await apply_text(kube, isvc_yaml("fine", "m", "llamacpp"))
    found = await wait_condition(kube, INFERENCE_SERVICE, "deep", "Ready", "False", "InvalidSpec")
    message = condition(found, "Ready")["message"]  # type: ignore[index]
    assert message.startswith("spec.extraVolumes[0]: nested more than 32 levels deep"), message
    assert found["status"]["phase"] == "Failed"
    await deployment(kube, "fine")
    assert await kube.get(DEPLOYMENT, "default", "deep") is None


async def running(kube: KubeClient, **settings: Any) -> Manager:
    config = ManagerConfig(http_port=0, http_host="127.0.0.1", workers=2, watch_timeout=30)
    manager = Manager(kube, config, reconcilers=reconcilers(Settings(**settings)))
    await manager.start()
    await manager.wait_synced()
    return manager


@pytest.fixture
async def rooted(kube: KubeClient) -> AsyncIterator[Manager]:
    """A controller whose operator allows host paths under /srv/models only."""
    manager = await running(kube, allowed_host_path_roots=("/srv/models",))
    yield manager
    await manager.stop()


async def test_host_path_volumes_are_refused_without_roots(
    kube: KubeClient, controller: Manager
) -> None:
    """The default operator allows no host path: a node's /etc (or its container runtime
    socket) is not an InferenceService author's to mount."""
    await apply_text(kube, GGUF_MODEL)
    volumes = [{"name": "scratch", "emptyDir": {}}, host_volume("/etc")]
    await kube.create(INFERENCE_SERVICE, isvc("s", extraVolumes=volumes))
    found = await wait_condition(kube, INFERENCE_SERVICE, "s", "Ready", "False", "SourceNotAllowed")
    message = condition(found, "Ready")["message"]  # type: ignore[index]
    assert message.startswith("spec.extraVolumes[1].hostPath.path: '/etc' is a host path"), message
    assert "--allowed-host-path-roots" in message and found["status"]["phase"] == "Failed"
    assert await kube.get(DEPLOYMENT, "default", "s") is None


async def test_host_path_volumes_only_under_the_operators_roots(
    kube: KubeClient, rooted: Manager
) -> None:
    await apply_text(kube, GGUF_MODEL)
    inside = [host_volume("/srv/models/llama")]
    await kube.create(INFERENCE_SERVICE, isvc("inside", extraVolumes=inside))
    dep = await deployment(kube, "inside")
    assert host_volume("/srv/models/llama") in dep["spec"]["template"]["spec"]["volumes"]
    for name, path in (("sibling", "/srv/models-evil"), ("climb", "/srv/models/../../etc")):
        await kube.create(INFERENCE_SERVICE, isvc(name, extraVolumes=[host_volume(path)]))
        found = await wait_condition(
            kube, INFERENCE_SERVICE, name, "Ready", "False", "SourceNotAllowed"
        )
        message = condition(found, "Ready")["message"]  # type: ignore[index]
        assert message.startswith(f"spec.extraVolumes[0].hostPath.path: {path!r}"), message
        assert await kube.get(DEPLOYMENT, "default", name) is None


async def test_any_host_path_when_the_operator_allows_it(kube: KubeClient) -> None:
    manager = await running(kube, allow_any_extra_volume_host_path=True)
    try:
        await apply_text(kube, GGUF_MODEL)
        await kube.create(INFERENCE_SERVICE, isvc("s", extraVolumes=[host_volume("/var/data")]))
        dep = await deployment(kube, "s")
        assert host_volume("/var/data") in dep["spec"]["template"]["spec"]["volumes"]
    finally:
        await manager.stop()


RUNTIME_DEFAULT = {"type": "RuntimeDefault"}
NO_PRIVILEGES = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
CACHE = CacheSettings(enabled=True)


def containers(pod: Obj) -> dict[str, Obj]:
    return {c["name"]: c for c in (*pod.get("initContainers", ()), *pod["containers"])}


def env(container: Obj) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env") or () if "value" in e}


async def test_serving_pods_are_hardened_by_default(kube: KubeClient, controller: Manager) -> None:
    """LLMKube's defaults: seccomp RuntimeDefault and fsGroup on the pod, no privilege
    escalation and no capabilities in its containers; and no service-account token."""
    await apply_text(kube, GGUF_MODEL)
    await apply_text(kube, isvc_yaml("s", "m", "llamacpp"))
    pod = (await deployment(kube, "s"))["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"] == {"seccompProfile": RUNTIME_DEFAULT, "fsGroup": 102}
    found = containers(pod)
    assert list(found) == ["model-loader", "inference"], "no cache claim: no prep"
    assert found["inference"]["securityContext"] == NO_PRIVILEGES
    assert found["model-loader"]["securityContext"] == NO_PRIVILEGES


async def test_the_users_security_fields_win_key_by_key(
    kube: KubeClient, controller: Manager
) -> None:
    await apply_text(kube, GGUF_MODEL)
    fields = {
        "podSecurityContext": {"fsGroup": 3000, "seccompProfile": {"type": "Unconfined"}},
        "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}, "runAsUser": 1000},
    }
    await kube.create(INFERENCE_SERVICE, isvc("s", **fields))
    pod = (await deployment(kube, "s"))["spec"]["template"]["spec"]
    assert pod["securityContext"] == fields["podSecurityContext"]
    assert containers(pod)["inference"]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"add": ["IPC_LOCK"]},
        "runAsUser": 1000,
    }
    assert pod["automountServiceAccountToken"] is False


async def test_a_runtime_on_a_port_below_1024_keeps_net_bind_service(
    kube: KubeClient, controller: Manager
) -> None:
    await apply_text(kube, GGUF_MODEL)
    await apply_text(kube, isvc_yaml("s", "m", "llamacpp", "  containerPort: 80"))
    pod = (await deployment(kube, "s"))["spec"]["template"]["spec"]
    runtime = containers(pod)["inference"]
    assert runtime["ports"][0]["containerPort"] == 80
    assert runtime["securityContext"]["capabilities"] == {
        "drop": ["ALL"],
        "add": ["NET_BIND_SERVICE"],
    }


async def test_a_loader_writing_the_cache_claim_gets_the_prep_first(kube: KubeClient) -> None:
    manager = await running(kube, model_cache=CACHE)
    try:
        await apply_text(kube, GGUF_MODEL)
        await apply_text(kube, isvc_yaml("s", "m", "llamacpp"))
        pod = (await deployment(kube, "s"))["spec"]["template"]["spec"]
        found = containers(pod)
        assert list(found) == ["model-cache-prep", "model-loader", "inference"]
        prep = found["model-cache-prep"]
        assert env(prep) == {"PREP_DIR": "/models", "PREP_GROUP": "102"}
        assert prep["volumeMounts"] == [{"name": "model-cache", "mountPath": "/models"}]
        assert prep["securityContext"] == {
            "runAsUser": 0,
            "runAsNonRoot": False,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]},
        }
        # The user's fsGroup is the group the prep gives the claim.
        spec = {"podSecurityContext": {"fsGroup": 3000}}
        await kube.create(INFERENCE_SERVICE, isvc("own", **spec))
        pod = (await deployment(kube, "own"))["spec"]["template"]["spec"]
        assert env(containers(pod)["model-cache-prep"])["PREP_GROUP"] == "3000"
        # runAsNonRoot: the kubelet would refuse a root prep; the user took it on.
        await kube.create(
            INFERENCE_SERVICE, isvc("nonroot", podSecurityContext={"runAsNonRoot": True})
        )
        pod = (await deployment(kube, "nonroot"))["spec"]["template"]["spec"]
        assert "model-cache-prep" not in containers(pod)
    finally:
        await manager.stop()


async def test_a_restricted_namespace_gets_non_root_pods_without_the_prep(
    kube: KubeClient,
) -> None:
    """Pod Security `restricted` enforced on the namespace (its label): the pods run as
    non-root 65532 and the root prep is left out (the profile refuses it; the kubelet's
    fsGroup ownership opens the claim); the user's keys still win. A namespace that
    starts enforcing it moves its services' pods there."""
    manager = await running(kube, model_cache=CACHE)
    try:
        await apply_text(kube, GGUF_MODEL)
        await apply_text(kube, isvc_yaml("s", "m", "llamacpp"))
        pod = (await deployment(kube, "s"))["spec"]["template"]["spec"]
        assert "model-cache-prep" in containers(pod)
        assert "runAsNonRoot" not in pod["securityContext"]
        label = {ENFORCE_LABEL: "restricted"}
        await kube.create(NAMESPACE, {"metadata": {"name": "default", "labels": label}})

        async def restricted_pod() -> Obj | None:
            spec = (await deployment(kube, "s"))["spec"]["template"]["spec"]
            return spec if spec["securityContext"].get("runAsNonRoot") else None

        pod = await eventually(restricted_pod, what="a non-root pod template")
        assert pod["securityContext"] == {
            "seccompProfile": RUNTIME_DEFAULT,
            "fsGroup": 102,
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "runAsGroup": 65532,
        }
        found = containers(pod)
        assert list(found) == ["model-loader", "inference"]
        assert found["inference"]["securityContext"] == NO_PRIVILEGES
        assert found["model-loader"]["securityContext"] == NO_PRIVILEGES
        await kube.create(INFERENCE_SERVICE, isvc("own", podSecurityContext={"runAsUser": 1000}))
        pod = (await deployment(kube, "own"))["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsUser"] == 1000
        assert pod["securityContext"]["runAsNonRoot"] is True
    finally:
        await kube.patch(NAMESPACE, "", "default", {"metadata": {"labels": {ENFORCE_LABEL: None}}})
        await manager.stop()


async def test_without_an_fsgroup_the_prep_opens_the_claim_root(kube: KubeClient) -> None:
    """--default-fsgroup=0 (OpenShift's SCC assigns a group): no fsGroup on the pod, and
    the prep makes the claim's root 1777 instead of giving it a group."""
    manager = await running(kube, model_cache=CACHE, default_fs_group=0)
    try:
        await apply_text(kube, GGUF_MODEL)
        await apply_text(kube, isvc_yaml("s", "m", "llamacpp"))
        pod = (await deployment(kube, "s"))["spec"]["template"]["spec"]
        assert pod["securityContext"] == {"seccompProfile": RUNTIME_DEFAULT}
        assert env(containers(pod)["model-cache-prep"]) == {"PREP_DIR": "/models"}
    finally:
        await manager.stop()


async def test_prefetch_job_pods_are_hardened_with_the_prep(kube: KubeClient) -> None:
    manager = await running(kube, model_cache=CACHE)
    try:
        await apply_text(
            kube,
            """
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {name: m}
spec: {source: "https://example.com/qwen3-8b-q4.gguf", prefetch: true}
""",
        )

        async def job() -> Obj | None:
            jobs, _ = await kube.list(JOB, "default")
            return jobs[0] if jobs else None

        pod = (await eventually(job, what="the prefetch Job"))["spec"]["template"]["spec"]
        assert pod["automountServiceAccountToken"] is False
        assert pod["securityContext"] == {"seccompProfile": RUNTIME_DEFAULT, "fsGroup": 102}
        assert [c["name"] for c in pod["initContainers"]] == ["model-cache-prep"]
        assert [c["name"] for c in pod["containers"]] == ["model-loader"]
        assert pod["containers"][0]["securityContext"] == NO_PRIVILEGES
    finally:
        await manager.stop()


async def test_a_prefetch_job_made_before_is_left_as_it_was_made(kube: KubeClient) -> None:
    """A Job's pod template cannot change: the Job an earlier controller made (without
    the hardening) is read, never applied again (kube-apiserver would refuse the apply
    on every reconcile)."""
    spec = {"source": "https://example.com/qwen3-8b-q4.gguf", "prefetch": True}
    model = await kube.create(
        MODEL,
        {
            "apiVersion": "inference.llmkube.dev/v1alpha1",
            "kind": "Model",
            "metadata": {"name": "m", "namespace": "default"},
            "spec": spec,
        },
    )
    name = job_name("m", parse_model(spec))
    owner = {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "Model",
        "name": "m",
        "uid": model["metadata"]["uid"],
        "controller": True,
    }
    earlier = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "ownerReferences": [owner]},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "model-loader", "image": "curlimages/curl:8.18.0"}],
                }
            }
        },
    }
    made = await kube.create(JOB, earlier)
    manager = await running(kube, model_cache=CACHE)
    try:
        await wait_condition(kube, MODEL, "m", "Prefetch", "False", "PrefetchRunning")
        job = await kube.get(JOB, "default", name)
        assert job is not None
        assert job["spec"]["template"]["spec"] == made["spec"]["template"]["spec"]
        assert HASH_ANNOTATION not in (job["metadata"].get("annotations") or {}), "not applied"
    finally:
        await manager.stop()
