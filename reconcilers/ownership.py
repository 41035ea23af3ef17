"""What marks an object as ours: the labels every controller sets and selects by, and the
owner reference that ties an object to the InferenceService that made it."""

from __future__ import annotations

from controller.resources import INFERENCE_SERVICE
from objtypes import Obj

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "llmkube"
SERVICE_LABEL = "inference.llmkube.dev/inferenceservice"
MODEL_LABEL = "inference.llmkube.dev/model"
MEMBER_LABEL = "inference.llmkube.dev/member"


def owner_reference(isvc: Obj) -> Obj:
    meta = isvc["metadata"]
    return {
        "apiVersion": INFERENCE_SERVICE.api_version,
        "kind": INFERENCE_SERVICE.kind,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def labels(isvc: Obj, model_name: str) -> dict[str, str]:
    name = isvc["metadata"]["name"]
    return {
        MANAGED_BY: MANAGER,
        "app.kubernetes.io/name": "llmkube-inference",
        "app.kubernetes.io/instance": name,
        SERVICE_LABEL: name,
        MODEL_LABEL: model_name,
    }


def selector(isvc: Obj) -> str:
    """The pods' label selector, as the scale subresource reports it."""
    return f"{SERVICE_LABEL}={isvc['metadata']['name']}"


def owned_metadata(isvc: Obj, name: str, model_name: str) -> Obj:
    """An object the InferenceService owns: its name, namespace, our labels, the owner."""
    return {
        "name": name,
        "namespace": isvc["metadata"]["namespace"],
        "labels": labels(isvc, model_name),
        "ownerReferences": [owner_reference(isvc)],
    }
