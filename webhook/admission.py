"""AdmissionReview v1 in, AdmissionReview v1 out, for Model, InferenceService and GPUQuota.

The verdict comes from api/, the same code the reconcilers use, so an object the
webhook admits is one the controller accepts and the other way round. Rules that span
an InferenceService and its Model (gpuSharing or multiNode with the Model's claims)
need the Model: given a lookup, the webhook checks them too. A Model whose source is a
host path outside the operator's --allowed-host-path-roots is refused as the reconcilers
refuse it (Ready=False SourceNotAllowed), and so is an InferenceService whose extraVolumes
mount a hostPath outside them (unless --allow-any-extra-volume-host-path).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from api import (
    InferenceServiceSpec,
    InvalidSpec,
    parse_gpu_quota,
    parse_inference_service,
    parse_model,
    rule_errors,
)
from api.source import host_path_error
from api.volumes import host_path_volume_errors
from controller.resources import GPU_QUOTA, GROUP, INFERENCE_SERVICE, MODEL
from objtypes import Obj
from runtimes.arg_errors import runtime_arg_errors

# (namespace, name) -> the Model object, or None when it does not exist (yet).
ModelLookup = Callable[[str, str], Obj | None]
API_VERSION = "admission.k8s.io/v1"
VALIDATORS: dict[str, Callable[[Any], object]] = {
    MODEL.kind: parse_model,
    INFERENCE_SERVICE.kind: parse_inference_service,
    GPU_QUOTA.kind: parse_gpu_quota,
}


class BadReview(ValueError):
    """The request is not an AdmissionReview we can answer: the HTTP answer is 400."""


def _request(body: bytes) -> Obj:
    try:
        review = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise BadReview(f"body is not JSON: {e}") from e
    if not isinstance(review, dict):
        raise BadReview("body must be a JSON object")
    if review.get("apiVersion") != API_VERSION or review.get("kind") != "AdmissionReview":
        raise BadReview(f"expected an AdmissionReview of {API_VERSION}")
    request = review.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str):
        raise BadReview("request.uid is required")
    return request


def _cross_object_errors(
    request: Obj, lookup: ModelLookup | None, roots: tuple[str, ...], any_host_path: bool
) -> list[str]:
    kind = (request.get("kind") or {}).get("kind")
    spec = (request.get("object") or {}).get("spec")
    if kind == MODEL.kind:
        refusal = host_path_error(parse_model(spec).location, roots)
        return [refusal] if refusal else []
    if kind != INFERENCE_SERVICE.kind:
        return []
    service = parse_inference_service(spec)
    volumes = host_path_volume_errors(service.fields.extra_volumes, roots, any_host_path)
    if lookup is None:
        return volumes
    model_obj = lookup(str(request.get("namespace") or ""), service.model_ref)
    if model_obj is None:
        return volumes  # the reconciler reports a missing Model; creation order is free
    try:
        model = parse_model(model_obj.get("spec"))
    except InvalidSpec:
        return volumes
    errors = volumes + rule_errors(service, model)
    refusal = host_path_error(model.location, roots)
    return errors + ([f"Model {service.model_ref!r} {refusal}"] if refusal else [])


def verdict(
    request: Obj,
    lookup: ModelLookup | None = None,
    roots: tuple[str, ...] = (),
    any_host_path: bool = False,
) -> tuple[bool, str]:
    """(allowed, message) for one admission request. roots: the operator's
    --allowed-host-path-roots; any_host_path: --allow-any-extra-volume-host-path."""
    if request.get("operation") == "DELETE":
        return True, ""
    kind = request.get("kind") or {}
    if not isinstance(kind, dict) or kind.get("group") != GROUP:
        return True, ""  # not ours: the webhook configuration should not send it
    validate = VALIDATORS.get(str(kind.get("kind")))
    if validate is None:
        return True, ""
    obj = request.get("object")
    if not isinstance(obj, dict):
        return False, "request.object must be an object"
    try:
        spec = validate(obj.get("spec"))
    except InvalidSpec as e:
        return False, "; ".join(e.errors)
    # What the pinned runtime would exit on (the reconciler says the same, by condition).
    errors = runtime_arg_errors(spec) if isinstance(spec, InferenceServiceSpec) else []
    errors += _cross_object_errors(request, lookup, roots, any_host_path)
    if errors:
        return False, "; ".join(errors)
    return True, ""


def review(
    body: bytes,
    lookup: ModelLookup | None = None,
    roots: tuple[str, ...] = (),
    any_host_path: bool = False,
) -> Obj:
    """The AdmissionReview response for a request body; raises BadReview."""
    request = _request(body)
    allowed, message = verdict(request, lookup, roots, any_host_path)
    response: Obj = {"uid": request["uid"], "allowed": allowed}
    if not allowed:
        response["status"] = {"code": 403, "reason": "Forbidden", "message": message}
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}
