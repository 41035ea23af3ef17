"""spec.slo: a Pyrra ServiceLevelObjective (pyrra.dev/v1alpha1) for the service.

Only with the operator's --enable-pyrra-slo (chart `pyrra.enabled`), as in LLMKube;
without it a service that sets spec.slo gets `SLOReady=False IntegrationDisabled` and
nothing is written. With it, the object (LLMKube's name `<service>-<indicator>` unless
spec.slo.name says otherwise) is server-side applied, owned by the InferenceService (the
garbage collector removes it with the service), and removed by us when spec.slo is
cleared, renamed or switches indicator. Pyrra turns it into recording rules and
burn-rate alerts; nothing here computes them.

The indicators read series that exist:

- availability: `llmkube_inferenceservice_ready{namespace,inferenceservice}`, the
  controller's own gauge (1 while the service's Ready condition is True, 0 otherwise,
  metrics/domain.py), as Pyrra's bool_gauge: the fraction of scrapes it was Ready.
  (LLMKube reads Prometheus' `up` of the serving pods instead, which needs its PodMonitor
  and a runtime that serves /metrics.)
- latency: vLLM's `vllm:e2e_request_latency_seconds` histogram, the requests under
  latencyThreshold (`le`, written as prometheus_client writes bucket bounds: "2" is
  le="2.0") over all requests, selected by the `namespace` and `service` target labels a
  Prometheus Operator ServiceMonitor of the service's Service gives. The other runtimes
  (LLMKube: llama.cpp has no request-latency histogram) get
  `IndicatorUnsupportedForRuntime`.
"""

from __future__ import annotations

import math

from prometheus_client.utils import floatToGoString

from api import InferenceServiceSpec, ServiceLevelObjective
from api import conditions as c
from api.integrations import subdomain_error
from controller.errors import ApiError
from controller.resources import ResourceType, object_key
from metrics.domain import READY_METRIC
from objtypes import Obj
from reconcilers.context import Context
from reconcilers.discovery import ServedTypes, crd_name
from reconcilers.inferenceservice.integrations import Integration, has_condition
from reconcilers.ownership import MANAGED_BY, MANAGER, SERVICE_LABEL, owned_metadata
from reconcilers.writes.apply import NotOwned, ensure, owned_by
from reconcilers.writes.conditions import Condition

PYRRA_SLO = ResourceType("pyrra.dev", "v1alpha1", "servicelevelobjectives", "ServiceLevelObjective")
# The runtimes whose request-latency histogram backs a latency SLO (LLMKube's table).
LATENCY_HISTOGRAMS = {"vllm": "vllm:e2e_request_latency_seconds"}
WINDOW_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 604800}
MAX_WINDOW = (2**63 - 1) // 10**9  # seconds: Prometheus durations are int64 nanoseconds


def slo_name(isvc: Obj, slo: ServiceLevelObjective) -> str:
    return slo.name or f"{isvc['metadata']['name']}-{slo.indicator}"


def _quoted(value: str) -> str:
    """A PromQL string literal."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _selector(**labels: str) -> str:
    return ",".join(f"{k}={_quoted(v)}" for k, v in labels.items())


def bucket_bound(seconds: str) -> str:
    """A latencyThreshold as the histogram's `le` label writes it (2 -> "2.0")."""
    # vLLM's histograms are prometheus_client's: its own formatting of the bound.
    return str(floatToGoString(float(seconds)))  # type: ignore[no-untyped-call]


def indicator(isvc: Obj, service: InferenceServiceSpec, slo: ServiceLevelObjective) -> Obj:
    """Pyrra's spec.indicator for the spec (latency: a runtime in LATENCY_HISTOGRAMS)."""
    ns, name = object_key(isvc)
    if slo.indicator == "availability":
        ready = _selector(namespace=ns, inferenceservice=name)
        return {"bool_gauge": {"metric": f"{READY_METRIC}{{{ready}}}"}}
    histogram = LATENCY_HISTOGRAMS[service.runtime]
    target = _selector(namespace=ns, service=name)
    le = _selector(le=bucket_bound(slo.latency_threshold or "0"))
    return {
        "latency": {
            "success": {"metric": f"{histogram}_bucket{{{target},{le}}}"},
            "total": {"metric": f"{histogram}_count{{{target}}}"},
        }
    }


def slo_problem(isvc: Obj, slo: ServiceLevelObjective) -> str | None:
    """What the schema cannot tell but Pyrra or the apiserver would refuse, by field."""
    bad_name = subdomain_error(slo_name(isvc, slo))
    if bad_name:
        field = "spec.slo.name" if slo.name else "spec.slo.name (defaulted)"
        return f"{field}: {bad_name}"
    length = int(slo.window[:-1]) * WINDOW_UNITS[slo.window[-1]]
    if length == 0:
        return f"spec.slo.window: {slo.window!r} is an empty window"
    if length > MAX_WINDOW:
        return f"spec.slo.window: {slo.window!r} is longer than a Prometheus duration can be"
    threshold = float(slo.latency_threshold or "0")
    if slo.indicator == "latency" and not 0 < threshold < math.inf:
        return (
            f"spec.slo.latencyThreshold: {slo.latency_threshold!r} must be a finite number "
            "of seconds above 0"
        )
    return None


def build_slo(isvc: Obj, service: InferenceServiceSpec, slo: ServiceLevelObjective) -> Obj:
    ns, name = object_key(isvc)
    return {
        "apiVersion": PYRRA_SLO.api_version,
        "kind": PYRRA_SLO.kind,
        "metadata": owned_metadata(isvc, slo_name(isvc, slo), service.model_ref),
        "spec": {
            "description": f"InferenceService {ns}/{name}: {slo.indicator} (llmkube spec.slo)",
            "target": slo.objective,
            "window": slo.window,
            "indicator": indicator(isvc, service, slo),
        },
    }


async def remove_slos(ctx: Context, isvc: Obj, keep: str | None = None) -> None:
    """Delete the service's ServiceLevelObjectives but `keep` (renamed, indicator switched,
    spec.slo cleared). Only ours: labelled for the service and owned by it."""
    ns, name = object_key(isvc)
    try:
        items, _ = await ctx.client.list(
            PYRRA_SLO, ns, label_selector=f"{SERVICE_LABEL}={name},{MANAGED_BY}={MANAGER}"
        )
    except ApiError as e:
        if e.not_found:  # the CRD is gone, and its objects with it
            return
        raise
    for item in items:
        if item["metadata"]["name"] != keep and owned_by(item, isvc["metadata"]["uid"]):
            await ctx.client.delete(PYRRA_SLO, ns, item["metadata"]["name"])


def _condition(status: bool, reason: str, message: str) -> tuple[Condition, ...]:
    return (Condition(c.SLO_READY, status, reason, message),)


async def ensure_slo(
    ctx: Context, served: ServedTypes, isvc: Obj, service: InferenceServiceSpec
) -> Integration:
    slo = service.slo
    if slo is None:
        # Ours may exist only where we said so on the status; without the switch the
        # controller has no access to Pyrra's objects (the chart grants none).
        ours = has_condition(ctx, isvc, c.SLO_READY) and ctx.settings.pyrra_slo
        if ours and not await served.missing([PYRRA_SLO]):
            await remove_slos(ctx, isvc)
        return Integration(cleared=(c.SLO_READY,))
    if not ctx.settings.pyrra_slo:
        return Integration(
            _condition(
                False,
                c.INTEGRATION_DISABLED,
                "spec.slo is set but the controller runs without --enable-pyrra-slo "
                "(chart pyrra.enabled): no ServiceLevelObjective is made",
            )
        )
    problem = slo_problem(isvc, slo)
    if problem:
        return Integration(_condition(False, c.INVALID_SPEC, problem))
    if slo.indicator == "latency" and service.runtime not in LATENCY_HISTOGRAMS:
        if not await served.missing([PYRRA_SLO]):
            await remove_slos(ctx, isvc)  # no stale SLO keeps alerting
        return Integration(
            _condition(
                False,
                c.INDICATOR_UNSUPPORTED,
                f"spec.slo.indicator: latency has no metric on runtime {service.runtime!r} "
                f"(a request-latency histogram: {', '.join(LATENCY_HISTOGRAMS)} only)",
            )
        )
    if await served.missing([PYRRA_SLO]):
        return _not_installed()
    desired = build_slo(isvc, service, slo)
    name = desired["metadata"]["name"]
    try:
        await ensure(ctx.client, ctx.cache, PYRRA_SLO, desired, isvc["metadata"]["uid"])
        await remove_slos(ctx, isvc, keep=name)
    except NotOwned as e:
        return Integration(_condition(False, c.OBJECT_NOT_OWNED, str(e)), recheck=True)
    except ApiError as e:
        if e.not_found:  # removed since discovery said it was there
            served.forget(PYRRA_SLO)
            return _not_installed()
        if e.status >= 500 or e.status in (409, 429):
            raise  # weather: the reconcile is retried
        return Integration(
            _condition(False, c.RECONCILE_FAILED, f"ServiceLevelObjective {name}: {e}"),
            recheck=True,
        )
    return Integration(
        _condition(True, c.SLO_CREATED, f"Pyrra ServiceLevelObjective {name!r} applied")
    )


def _not_installed() -> Integration:
    return Integration(
        _condition(
            False,
            c.PYRRA_NOT_INSTALLED,
            f"the CustomResourceDefinition {crd_name(PYRRA_SLO)} ({PYRRA_SLO.api_version} "
            f"{PYRRA_SLO.kind}) is not installed: see https://github.com/pyrra-dev/pyrra",
        ),
        recheck=True,
    )
