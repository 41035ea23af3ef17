"""The serving workload of an InferenceService: Deployment (or pinned member Pods) and Service.

Pure functions from the specs to the objects the reconciler makes exist.
"""

from __future__ import annotations

from api import InferenceServiceSpec, ModelSpec
from api.source import HF_ENDPOINT
from objtypes import Obj
from reconcilers.inferenceservice.pod_fields import apply_pod_fields, deployment_fields
from reconcilers.inferenceservice.scope import Scope
from reconcilers.ownership import (
    MEMBER_LABEL,
    SERVICE_LABEL,
    labels,
    owned_metadata,
)
from reconcilers.pod_security import harden
from reconcilers.sources.loader import (
    hf_token_env,
    needs_loader,
    secret_env,
)
from runtimes.command import Member, RuntimeCommand, runtime_command
from runtimes.gpu import GPUAttachment, gpu_attachment, uses_gpu

# A Deployment's rolling update as kube-apiserver defaults it.
ROLLING_UPDATE = {"maxSurge": "25%", "maxUnavailable": "25%"}
CONTAINER = "inference"


def pod_labels(isvc: Obj, service: InferenceServiceSpec) -> dict[str, str]:
    """spec.podLabels, under ours: our labels select the pods and must win."""
    return {**service.pod.pod_labels, **labels(isvc, service.model_ref)}


# Runtimes whose health endpoint answers while busy (llama.cpp's /health is served
# off the HTTP threads, not the task queue), so a failing one means a wedged server.
LIVENESS_RUNTIMES = ("llamacpp",)


def liveness_probe(cmd: RuntimeCommand) -> Obj:
    """LLMKube's llama.cpp liveness probe: after the startup probe passed, three failed
    /health checks 15 s apart (5 s each: a saturated CPU answers slowly) restart it."""
    return {
        "httpGet": {"path": cmd.health_path, "port": "http"},
        "periodSeconds": 15,
        "timeoutSeconds": 5,
        "failureThreshold": 3,
    }


def _container(
    cmd: RuntimeCommand,
    service: InferenceServiceSpec,
    model: ModelSpec,
    attach: GPUAttachment,
    mounts: list[Obj],
    hub: str = HF_ENDPOINT,
) -> Obj:
    resources: Obj = {}
    # The InferenceService's resources win over the Model's (LLMKube's order), and
    # hostMemory (the RAM of CPU offloading) over memory: LLMKube's request; as our
    # limit too, so an offloading runtime is not held to `memory`.
    cpu = service.cpu or model.cpu
    memory = service.host_memory or service.memory or model.memory
    storage = service.ephemeral_storage
    requests = {
        k: v for k, v in (("cpu", cpu), ("memory", memory), ("ephemeral-storage", storage)) if v
    }
    if requests:
        resources["requests"] = dict(requests)
    limits = dict(attach.limits)
    if memory:
        limits["memory"] = memory
    if storage:  # the limit keeps an overrun charged to this pod, not the node
        limits["ephemeral-storage"] = storage
    if limits:
        resources["limits"] = limits
    if attach.container_claims:
        resources["claims"] = list(attach.container_claims)
    # The port the runtime really listens on (a user --port wins); probes and the
    # Service name the port "http", so they follow it.
    container: Obj = {
        "name": CONTAINER,
        "image": cmd.image,
        "imagePullPolicy": "IfNotPresent",
        "args": cmd.args,
        "ports": [{"name": "http", "containerPort": cmd.port, "protocol": "TCP"}],
        "resources": resources,
        "volumeMounts": mounts,
    }
    if cmd.serves_http:  # vLLM's headless multiNode members serve no HTTP
        container["readinessProbe"] = {
            "httpGet": {"path": cmd.health_path, "port": "http"},
            "periodSeconds": 10,
            "failureThreshold": 3,
        }
        container["startupProbe"] = {
            "httpGet": {"path": cmd.health_path, "port": "http"},
            "periodSeconds": 10,
            "failureThreshold": 180,  # large models take minutes to load
        }
        if service.runtime in LIVENESS_RUNTIMES:
            container["livenessProbe"] = liveness_probe(cmd)
    if cmd.command:
        container["command"] = cmd.command
    tokens = _hf_token_env(service, model, hub)
    env = [*cmd.env, *_hub_env(model, hub), *tokens, *(dict(e) for e in service.pod.env)]
    if env:
        container["env"] = env
    return container


def _hub_env(model: ModelSpec, hub: str) -> list[Obj]:
    """HF_ENDPOINT for a runtime that downloads a hub repo itself (huggingface_hub, TGI's
    hf-hub and llama.cpp's -hf all read it), where the operator names another hub."""
    if hub == HF_ENDPOINT or model.location.kind != "hub" or needs_loader(model):
        return []
    return [{"name": "HF_ENDPOINT", "value": hub}]


def _hf_token_env(service: InferenceServiceSpec, model: ModelSpec, hub: str) -> list[Obj]:
    """HF_TOKEN for the runtimes that download from the hub (vLLM, SGLang, TGI): from
    <runtime>Config.hfTokenSecretRef, else the Model's sourceSecretRef of an hf source.
    A secretKeyRef: the value is never copied into the pod spec."""
    if service.runtime == "llamacpp":
        return []
    token = (
        secret_env("HF_TOKEN", *service.hf_token)
        if service.hf_token
        else hf_token_env(model, None, hub)
    )
    if token is None:
        return []
    if service.runtime == "tgi":  # TGI also reads the older name
        return [token, {**token, "name": "HUGGING_FACE_HUB_TOKEN"}]
    return [token]


def _scheduling(service: InferenceServiceSpec, attach: GPUAttachment) -> Obj:
    """The pod fields LLMKube passes through from the InferenceService as they are, the
    GPU nodes' taint tolerated first (gpu_toleration)."""
    p = service.pod
    tolerations = [dict(t) for t in p.tolerations]
    if attach.toleration and not any(_covers(t, attach.toleration) for t in tolerations):
        tolerations.insert(0, dict(attach.toleration))
    fields: Obj = {
        "tolerations": tolerations,
        "nodeSelector": dict(p.node_selector),
        "affinity": p.affinity,
        "topologySpreadConstraints": [dict(t) for t in p.topology_spread_constraints],
        "imagePullSecrets": [dict(s) for s in p.image_pull_secrets],
        "priorityClassName": p.priority_class_name,
        "runtimeClassName": p.runtime_class_name,
    }
    return {k: v for k, v in fields.items() if v}


def _covers(user: Obj, ours: Obj) -> bool:
    """Whether the user's toleration speaks for our taint key: theirs wins (one naming
    the key, or tolerating every key), whatever its effect or value."""
    key = user.get("key") or ""
    return key == ours["key"] or (not key and user.get("operator") == "Exists")


def pod_spec(scope: Scope, member: Member | None = None) -> Obj:
    """The pod of the scope's service: the plan's placement and runtime command (a
    multiNode member's: its rank's flags on the same model argument)."""
    service, model, placement = scope.service, scope.model, scope.placement
    cmd = scope.command
    if member is not None:
        cmd = runtime_command(
            service,
            model,
            placement.arg,
            service.model_ref,
            scope.claimed,
            member,
            placement.mmproj,
            scope.images,
        )
    attach = gpu_attachment(model, service)
    volumes, mounts = list(placement.volumes), list(placement.mounts)
    if placement.models_dir:
        volumes.insert(0, placement.store.volume())
        mounts.insert(0, placement.store.runtime_mount())
    spec: Obj = {
        "containers": [_container(cmd, service, model, attach, mounts, scope.hub)],
        "volumes": volumes,
        **_scheduling(service, attach),
    }
    if placement.loader:
        spec["initContainers"] = [placement.loader]
    if attach.pod_claims:
        spec["resourceClaims"] = list(attach.pod_claims)
    apply_pod_fields(spec, service, cmd.serves_http)
    harden(
        spec,
        scope.fs_group,
        user_pod=service.fields.pod_security_context,
        user_container=service.fields.security_context,
        runtime_port=cmd.port,
        cache_volume=placement.store.volume_name if placement.store.claim else None,
        restricted=scope.restricted,
    )
    return spec


def build_deployment(scope: Scope, replicas: int) -> Obj:
    isvc, service, model = scope.isvc, scope.service, scope.model
    model_name = service.model_ref
    name = isvc["metadata"]["name"]
    template_meta: Obj = {"labels": pod_labels(isvc, service)}
    if service.pod.pod_annotations:
        template_meta["annotations"] = dict(service.pod.pod_annotations)
    # GPU pods hold devices: a surge pod would wait for GPUs the old pod still holds.
    strategy: Obj = {"type": "Recreate"}
    if not uses_gpu(model, service):
        # kube-apiserver's defaults, applied so that they are ours: a defaulted
        # rollingUpdate belongs to no manager, and a later switch to Recreate would be
        # refused with it still there (kubernetes/kubernetes#24198).
        strategy = {"type": "RollingUpdate", "rollingUpdate": dict(ROLLING_UPDATE)}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": owned_metadata(isvc, name, model_name),
        "spec": {
            "replicas": replicas,
            **deployment_fields(service),
            "selector": {"matchLabels": {SERVICE_LABEL: name}},
            "strategy": strategy,
            "template": {
                "metadata": template_meta,
                "spec": pod_spec(scope),
            },
        },
    }


def members_service_name(isvc: Obj) -> str:
    return f"{isvc['metadata']['name']}-members"


def leader_address(isvc: Obj, service: InferenceServiceSpec) -> str:
    """members[0].fabric.address, else rank 0's DNS name under the headless Service."""
    name, ns = isvc["metadata"]["name"], isvc["metadata"]["namespace"]
    assert service.multi_node is not None
    head = service.multi_node.members[0].address
    return head or f"{name}-0.{members_service_name(isvc)}.{ns}.svc"


def build_member_pods(scope: Scope, replicas: int) -> list[Obj]:
    """multiNode: one pod per member, pinned with nodeName (device-plugin GPUs only).

    Each gets its rank's runtime flags; rank 0 serves the API, and the headless
    Service `<name>-members` gives every member a DNS name for the rendezvous.
    """
    isvc, service = scope.isvc, scope.service
    if replicas == 0 or service.multi_node is None:
        return []
    name = isvc["metadata"]["name"]
    members = service.multi_node.members
    leader = leader_address(isvc, service)
    port = service.multi_node.rendezvous_port
    pods = []
    for rank, member in enumerate(members):
        spec = pod_spec(scope, Member(rank, len(members), leader, port))
        spec["nodeName"] = member.node
        spec["hostname"] = f"{name}-{rank}"
        spec["subdomain"] = members_service_name(isvc)
        spec["restartPolicy"] = "Always"
        container = spec["containers"][0]
        container["env"] = [
            *container.get("env", []),
            {"name": "LLMKUBE_NODE_RANK", "value": str(rank)},
            {"name": "LLMKUBE_WORLD_SIZE", "value": str(len(members))},
            {"name": "LLMKUBE_LEADER_ADDRESS", "value": leader},
            {"name": "LLMKUBE_RENDEZVOUS_PORT", "value": str(port)},
        ]
        container["ports"].append({"name": "rendezvous", "containerPort": port, "protocol": "TCP"})
        meta = owned_metadata(isvc, f"{name}-{rank}", service.model_ref)
        meta["labels"] = {**service.pod.pod_labels, **meta["labels"], MEMBER_LABEL: str(rank)}
        if service.pod.pod_annotations:
            meta["annotations"] = dict(service.pod.pod_annotations)
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
    return pods


def build_members_service(isvc: Obj, service: InferenceServiceSpec) -> Obj:
    """multiNode rendezvous: a headless Service over all members, ready or not yet."""
    name = isvc["metadata"]["name"]
    assert service.multi_node is not None
    port = service.multi_node.rendezvous_port
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": owned_metadata(isvc, members_service_name(isvc), service.model_ref),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {SERVICE_LABEL: name},
            "ports": [{"name": "rendezvous", "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }


def build_service(isvc: Obj, service: InferenceServiceSpec) -> Obj:
    """spec.endpoint: the Service's port (default 8080) and type; the pod's http port behind.

    multiNode: only rank 0 serves the API, so only it is selected.
    """
    name = isvc["metadata"]["name"]
    ep = service.endpoint
    port: Obj = {"name": "http", "port": ep.port, "targetPort": "http", "protocol": "TCP"}
    if ep.node_port and ep.type != "ClusterIP":
        port["nodePort"] = ep.node_port
    selector = {SERVICE_LABEL: name}
    if service.multi_node is not None:
        selector[MEMBER_LABEL] = "0"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": owned_metadata(isvc, name, service.model_ref),
        "spec": {"selector": selector, "ports": [port], "type": ep.type},
    }
