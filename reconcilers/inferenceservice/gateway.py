"""spec.endpoint.gateway: the service behind an Envoy AI Gateway, as LLMKube exposes it.

With `enabled: true`, three objects named after the service, in its namespace, owned by
it (LLMKube's set, pinned there to Envoy Gateway v1.8.1 and Envoy AI Gateway v0.7.0):

- a `Backend` (gateway.envoyproxy.io/v1alpha1) at the service's Service,
  `<name>.<namespace>.svc.cluster.local:<endpoint.port>`;
- an `AIServiceBackend` (aigateway.envoyproxy.io/v1beta1) that speaks the OpenAI schema
  to that Backend;
- an `AIGatewayRoute` (aigateway.envoyproxy.io/v1beta1) attached to the Gateway
  `gatewayRef` names (another namespace: its listener's allowedRoutes must admit this
  one), whose one rule sends requests whose `x-ai-eg-model` header (the gateway fills it
  from the body's "model") equals `modelName` (default: modelRef) to that backend.

There is no operator switch (LLMKube has none): a cluster without the CRDs gets
`GatewayReady=False GatewayCRDsNotInstalled` naming them. `status.gateway` says
`routeReady` (the three applied) and the `modelName` matched. Disabling or removing the
field deletes them; deleting the service lets the garbage collector do it.
"""

from __future__ import annotations

from api import InferenceServiceSpec
from api import conditions as c
from api.integrations import GatewayExposure, header_value_error, label_error, subdomain_error
from controller.errors import ApiError
from controller.resources import ResourceType, object_key
from objtypes import Obj
from reconcilers.context import Context
from reconcilers.discovery import ServedTypes, crd_name
from reconcilers.inferenceservice.integrations import Integration, has_condition
from reconcilers.ownership import owned_metadata
from reconcilers.writes.apply import NotOwned, ensure, owned_by
from reconcilers.writes.conditions import Condition

BACKEND = ResourceType("gateway.envoyproxy.io", "v1alpha1", "backends", "Backend")
AI_SERVICE_BACKEND = ResourceType(
    "aigateway.envoyproxy.io", "v1beta1", "aiservicebackends", "AIServiceBackend"
)
AI_GATEWAY_ROUTE = ResourceType(
    "aigateway.envoyproxy.io", "v1beta1", "aigatewayroutes", "AIGatewayRoute"
)
# In the order they are applied: each refers to the one before.
GATEWAY_TYPES = (BACKEND, AI_SERVICE_BACKEND, AI_GATEWAY_ROUTE)
GATEWAY_API_GROUP = "gateway.networking.k8s.io"
MODEL_HEADER = "x-ai-eg-model"  # the AI Gateway's header for the request's model
OWNERS = {BACKEND: "Envoy Gateway", AI_SERVICE_BACKEND: "Envoy AI Gateway"}


def model_name(service: InferenceServiceSpec, gateway: GatewayExposure) -> str:
    return gateway.model_name or service.model_ref


def gateway_problem(service: InferenceServiceSpec, gateway: GatewayExposure) -> str | None:
    """What the route's CRD (or the Gateway API) would refuse, by field."""
    path = "spec.endpoint.gateway"
    bad = subdomain_error(gateway.gateway_name)
    if bad:
        return f"{path}.gatewayRef.name: {bad}"
    if gateway.gateway_namespace is not None:
        bad = label_error(gateway.gateway_namespace)
        if bad:
            return f"{path}.gatewayRef.namespace: {bad}"
    bad = header_value_error(model_name(service, gateway))
    if bad:
        return f"{path}.modelName{'' if gateway.model_name else ' (modelRef)'}: {bad}"
    return None


def _object(rt: ResourceType, isvc: Obj, service: InferenceServiceSpec, spec: Obj) -> Obj:
    return {
        "apiVersion": rt.api_version,
        "kind": rt.kind,
        "metadata": owned_metadata(isvc, isvc["metadata"]["name"], service.model_ref),
        "spec": spec,
    }


def build_backend(isvc: Obj, service: InferenceServiceSpec) -> Obj:
    ns, name = object_key(isvc)
    host = f"{name}.{ns}.svc.cluster.local"
    endpoint = {"fqdn": {"hostname": host, "port": service.endpoint.port}}
    return _object(BACKEND, isvc, service, {"endpoints": [endpoint]})


def build_ai_service_backend(isvc: Obj, service: InferenceServiceSpec) -> Obj:
    ref = {"name": isvc["metadata"]["name"], "kind": BACKEND.kind, "group": BACKEND.group}
    return _object(
        AI_SERVICE_BACKEND, isvc, service, {"schema": {"name": "OpenAI"}, "backendRef": ref}
    )


def build_route(isvc: Obj, service: InferenceServiceSpec, gateway: GatewayExposure) -> Obj:
    parent: Obj = {"name": gateway.gateway_name, "kind": "Gateway", "group": GATEWAY_API_GROUP}
    if gateway.gateway_namespace:
        parent["namespace"] = gateway.gateway_namespace
    match = {"type": "Exact", "name": MODEL_HEADER, "value": model_name(service, gateway)}
    rule = {
        "matches": [{"headers": [match]}],
        "backendRefs": [{"name": isvc["metadata"]["name"]}],
    }
    return _object(AI_GATEWAY_ROUTE, isvc, service, {"parentRefs": [parent], "rules": [rule]})


def build_gateway_objects(
    isvc: Obj, service: InferenceServiceSpec, gateway: GatewayExposure
) -> list[tuple[ResourceType, Obj]]:
    return [
        (BACKEND, build_backend(isvc, service)),
        (AI_SERVICE_BACKEND, build_ai_service_backend(isvc, service)),
        (AI_GATEWAY_ROUTE, build_route(isvc, service, gateway)),
    ]


async def remove_gateway_objects(ctx: Context, served: ServedTypes, isvc: Obj) -> None:
    """Delete the service's three objects, route first (only ours; a type not served has none)."""
    ns, name = object_key(isvc)
    absent = await served.missing(GATEWAY_TYPES)
    for rt in reversed(GATEWAY_TYPES):
        if rt in absent:
            continue
        live = await ctx.client.get(rt, ns, name)
        if live is not None and owned_by(live, isvc["metadata"]["uid"]):
            await ctx.client.delete(rt, ns, name)


def _ready(status: bool, reason: str, message: str) -> tuple[Condition, ...]:
    return (Condition(c.GATEWAY_READY, status, reason, message),)


def _not_installed(missing: list[ResourceType], model: str) -> Integration:
    names = ", ".join(f"{crd_name(rt)} ({OWNERS.get(rt, 'Envoy AI Gateway')})" for rt in missing)
    return Integration(
        _ready(
            False,
            c.GATEWAY_CRDS_NOT_INSTALLED,
            f"the CustomResourceDefinitions {names} are not installed: no route is made",
        ),
        status={"gateway": {"routeReady": False, "modelName": model}},
        recheck=True,
    )


async def ensure_gateway(
    ctx: Context, served: ServedTypes, isvc: Obj, service: InferenceServiceSpec
) -> Integration:
    gateway = service.gateway
    if gateway is None or not gateway.enabled:
        if has_condition(ctx, isvc, c.GATEWAY_READY):
            await remove_gateway_objects(ctx, served, isvc)
        return Integration(cleared=(c.GATEWAY_READY,))
    model = model_name(service, gateway)
    not_ready = {"gateway": {"routeReady": False, "modelName": model}}
    problem = gateway_problem(service, gateway)
    if problem:
        return Integration(_ready(False, c.INVALID_SPEC, problem), status=not_ready)
    missing = await served.missing(GATEWAY_TYPES)
    if missing:
        return _not_installed(missing, model)
    uid = isvc["metadata"]["uid"]
    for rt, desired in build_gateway_objects(isvc, service, gateway):
        try:
            await ensure(ctx.client, ctx.cache, rt, desired, uid)
        except NotOwned as e:
            return Integration(
                _ready(False, c.OBJECT_NOT_OWNED, str(e)), status=not_ready, recheck=True
            )
        except ApiError as e:
            if e.not_found:
                served.forget(rt)
                return _not_installed([rt], model)
            if e.status >= 500 or e.status in (409, 429):
                raise
            return Integration(
                _ready(False, c.RECONCILE_FAILED, f"{rt.kind} {desired['metadata']['name']}: {e}"),
                status=not_ready,
                recheck=True,
            )
    where = f"{gateway.gateway_namespace}/" if gateway.gateway_namespace else ""
    return Integration(
        _ready(
            True,
            c.EXPOSED,
            f"model {model!r} routed from Gateway {where}{gateway.gateway_name} "
            f"(AIGatewayRoute {isvc['metadata']['name']})",
        ),
        status={"gateway": {"routeReady": True, "modelName": model}},
    )
