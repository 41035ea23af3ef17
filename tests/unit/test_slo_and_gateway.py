"""spec.slo and spec.endpoint.gateway without a server: the schema's refusals, the objects
built (names, defaults, queries, owner references), the builders' own refusals, the
discovery of optional CRDs, the availability gauge, and the operator's switch and RBAC."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from api import InvalidSpec, parse_inference_service
from api.unserved import inference_service_fields
from app.cli import parse
from controller.errors import NotFound
from controller.permissions import CLUSTER_RULES, PYRRA_RULES, PolicyRule
from controller.resources import ResourceType
from metrics.domain import READY_METRIC, DomainCollector, DomainObjects
from objtypes import Obj
from reconcilers.discovery import ABSENT_RECHECK, ServedTypes
from reconcilers.inferenceservice.gateway import (
    AI_GATEWAY_ROUTE,
    AI_SERVICE_BACKEND,
    BACKEND,
    build_gateway_objects,
    gateway_problem,
)
from reconcilers.inferenceservice.slo import bucket_bound, build_slo, slo_name, slo_problem
from tests.support.chart import find, render, rules_of

ISVC: Obj = {
    "apiVersion": "inference.llmkube.dev/v1alpha1",
    "kind": "InferenceService",
    "metadata": {"name": "chat", "namespace": "team-a", "uid": "uid-1"},
}


def spec(**fields: Any) -> Any:
    return parse_inference_service({"modelRef": "qwen", "runtime": "vllm", **fields})


def refused(**fields: Any) -> list[str]:
    with pytest.raises(InvalidSpec) as e:
        spec(**fields)
    return e.value.errors


# -- the schema (the CRD's own rules, LLMKube's) ------------------------------------------


def test_slo_defaults_are_llmkubes() -> None:
    slo = spec(slo={"objective": "99.5"}).slo
    assert (slo.objective, slo.window, slo.indicator, slo.name) == (
        "99.5",
        "28d",
        "availability",
        None,
    )
    assert spec().slo is None


@pytest.mark.parametrize(
    ("slo", "error"),
    [
        ({"objective": "49.99"}, "spec.slo.objective: objective must be a number between 50"),
        ({"objective": "100"}, "spec.slo.objective: objective must be a number between 50"),
        ({"objective": 99.5}, "spec.slo.objective: must be a string"),
        ({"objective": "99.5%"}, "spec.slo.objective: '99.5%': must be a percentage"),
        ({"objective": "99.5\n"}, "spec.slo.objective: '99.5\\n': must be a percentage"),
        ({}, "spec.slo.objective: required"),
        ({"objective": "99", "window": "4 weeks"}, "spec.slo.window: '4 weeks': must be a whole"),
        ({"objective": "99", "indicator": "throughput"}, "spec.slo.indicator: 'throughput'"),
        (
            {"objective": "99", "indicator": "latency"},
            "spec.slo.latencyThreshold: latencyThreshold is required when indicator is latency",
        ),
        (
            {"objective": "99", "indicator": "latency", "latencyThreshold": "2s"},
            "spec.slo.latencyThreshold: '2s': must be a number of seconds",
        ),
    ],
)
def test_bad_slo_fields_are_refused_by_name(slo: Obj, error: str) -> None:
    errors = refused(slo=slo)
    assert any(e.startswith(error) for e in errors), errors


@pytest.mark.parametrize(
    ("gateway", "error"),
    [
        ({"enabled": True}, "spec.endpoint.gateway.gatewayRef: required"),
        ({"enabled": True, "gatewayRef": {}}, "spec.endpoint.gateway.gatewayRef.name: required"),
        ({"enabled": "yes", "gatewayRef": {"name": "gw"}}, "spec.endpoint.gateway.enabled"),
    ],
)
def test_bad_gateway_fields_are_refused_by_name(gateway: Obj, error: str) -> None:
    errors = refused(endpoint={"gateway": gateway})
    assert any(e.startswith(error) for e in errors), errors


def test_slo_and_gateway_are_served_fields_now() -> None:
    raw = {
        "modelRef": "m",
        "slo": {"objective": "99"},
        "endpoint": {"gateway": {"enabled": True, "gatewayRef": {"name": "gw"}}},
    }
    assert inference_service_fields(raw) == []


# -- the ServiceLevelObjective -------------------------------------------------------------


def test_slo_object_names_owner_and_availability_query() -> None:
    service = spec(slo={"objective": "99.5"})
    obj = build_slo(ISVC, service, service.slo)
    meta = obj["metadata"]
    assert (obj["apiVersion"], obj["kind"]) == ("pyrra.dev/v1alpha1", "ServiceLevelObjective")
    assert (meta["name"], meta["namespace"]) == ("chat-availability", "team-a")
    assert meta["labels"]["inference.llmkube.dev/inferenceservice"] == "chat"
    assert meta["labels"]["app.kubernetes.io/managed-by"] == "llmkube"
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "inference.llmkube.dev/v1alpha1",
            "kind": "InferenceService",
            "name": "chat",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert obj["spec"]["target"] == "99.5"  # Pyrra's target: the same string
    assert obj["spec"]["window"] == "28d"
    assert obj["spec"]["indicator"] == {
        "bool_gauge": {
            "metric": f'{READY_METRIC}{{namespace="team-a",inferenceservice="chat"}}',
        }
    }


def test_latency_slo_reads_vllms_histogram_at_the_bucket_bound() -> None:
    slo = {"objective": "95", "indicator": "latency", "latencyThreshold": "2", "window": "7d"}
    service = spec(slo=slo)
    obj = build_slo(ISVC, service, service.slo)
    assert obj["metadata"]["name"] == "chat-latency"
    assert obj["spec"]["window"] == "7d"
    histogram = "vllm:e2e_request_latency_seconds"
    assert obj["spec"]["indicator"] == {
        "latency": {
            "success": {
                "metric": f'{histogram}_bucket{{namespace="team-a",service="chat",le="2.0"}}'
            },
            "total": {"metric": f'{histogram}_count{{namespace="team-a",service="chat"}}'},
        }
    }
    # As prometheus_client (vLLM's metrics library) writes the bound: le="2" matches none.
    assert [bucket_bound(v) for v in ("2", "0.5", "0.50", "1920", "007")] == [
        "2.0",
        "0.5",
        "0.5",
        "1920.0",
        "7.0",
    ]


def test_slo_name_is_spec_slo_name_when_set() -> None:
    service = spec(slo={"objective": "99", "name": "search-availability"})
    assert slo_name(ISVC, service.slo) == "search-availability"
    assert build_slo(ISVC, service, service.slo)["metadata"]["name"] == "search-availability"


@pytest.mark.parametrize(
    ("slo", "isvc_name", "problem"),
    [
        ({"objective": "99", "name": "Search SLO"}, "chat", "spec.slo.name: 'Search SLO' is not"),
        ({"objective": "99"}, "c" * 250, "spec.slo.name (defaulted): "),
        ({"objective": "99", "window": "0d"}, "chat", "spec.slo.window: '0d' is an empty window"),
        ({"objective": "99", "window": "999999999w"}, "chat", "spec.slo.window: '999999999w'"),
        (
            {"objective": "99", "indicator": "latency", "latencyThreshold": "0.0"},
            "chat",
            "spec.slo.latencyThreshold: '0.0' must be a finite number of seconds above 0",
        ),
        (
            {"objective": "99", "indicator": "latency", "latencyThreshold": "1" + "0" * 400},
            "chat",
            "spec.slo.latencyThreshold: ",
        ),
    ],
)
def test_slo_the_apiserver_or_pyrra_would_refuse_is_refused_by_field(
    slo: Obj, isvc_name: str, problem: str
) -> None:
    isvc = {"metadata": {**ISVC["metadata"], "name": isvc_name}}
    found = slo_problem(isvc, spec(slo=slo).slo)
    assert found is not None and found.startswith(problem), found


def test_a_valid_slo_has_no_problem() -> None:
    for slo in (
        {"objective": "99.999", "window": "52w"},
        {"objective": "50", "indicator": "latency", "latencyThreshold": "0.3"},
    ):
        assert slo_problem(ISVC, spec(slo=slo).slo) is None


# -- the Envoy AI Gateway objects ----------------------------------------------------------


def gateway_spec(**gateway: Any) -> Any:
    return spec(endpoint={"port": 9000, "gateway": {"enabled": True, **gateway}})


def test_gateway_objects_point_at_the_service_and_the_named_gateway() -> None:
    service = gateway_spec(gatewayRef={"name": "public", "namespace": "gateways"})
    objects = dict(build_gateway_objects(ISVC, service, service.gateway))
    assert list(objects) == [BACKEND, AI_SERVICE_BACKEND, AI_GATEWAY_ROUTE]
    for rt, obj in objects.items():
        assert (obj["apiVersion"], obj["kind"]) == (rt.api_version, rt.kind)
        assert obj["metadata"]["name"] == "chat" and obj["metadata"]["namespace"] == "team-a"
        assert obj["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
        assert obj["metadata"]["ownerReferences"][0]["controller"] is True
    assert objects[BACKEND]["spec"] == {
        "endpoints": [{"fqdn": {"hostname": "chat.team-a.svc.cluster.local", "port": 9000}}]
    }
    assert objects[AI_SERVICE_BACKEND]["spec"] == {
        "schema": {"name": "OpenAI"},
        "backendRef": {"name": "chat", "kind": "Backend", "group": "gateway.envoyproxy.io"},
    }
    assert objects[AI_GATEWAY_ROUTE]["spec"] == {
        "parentRefs": [
            {
                "name": "public",
                "kind": "Gateway",
                "group": "gateway.networking.k8s.io",
                "namespace": "gateways",
            }
        ],
        "rules": [
            {
                "matches": [
                    {"headers": [{"type": "Exact", "name": "x-ai-eg-model", "value": "qwen"}]}
                ],
                "backendRefs": [{"name": "chat"}],
            }
        ],
    }


def test_route_in_the_services_namespace_and_an_explicit_model_name() -> None:
    service = gateway_spec(gatewayRef={"name": "public"}, modelName="Qwen/Qwen3-8B")
    route = dict(build_gateway_objects(ISVC, service, service.gateway))[AI_GATEWAY_ROUTE]
    assert "namespace" not in route["spec"]["parentRefs"][0]
    header = route["spec"]["rules"][0]["matches"][0]["headers"][0]
    assert header["value"] == "Qwen/Qwen3-8B"


@pytest.mark.parametrize(
    ("gateway", "problem"),
    [
        ({"gatewayRef": {"name": ""}}, "spec.endpoint.gateway.gatewayRef.name: '' is not"),
        ({"gatewayRef": {"name": "Public GW"}}, "spec.endpoint.gateway.gatewayRef.name: "),
        (
            {"gatewayRef": {"name": "gw", "namespace": "gate.ways"}},
            "spec.endpoint.gateway.gatewayRef.namespace: 'gate.ways' is not",
        ),
        (
            {"gatewayRef": {"name": "gw"}, "modelName": "qwen\r\nx-admin: 1"},
            "spec.endpoint.gateway.modelName: ",
        ),
        ({"gatewayRef": {"name": "gw"}, "modelName": "qwén"}, "spec.endpoint.gateway.modelName"),
        ({"gatewayRef": {"name": "gw"}, "modelName": "m" * 4097}, "spec.endpoint.gateway"),
    ],
)
def test_gateway_fields_the_route_would_refuse_are_refused_by_name(
    gateway: Obj, problem: str
) -> None:
    service = gateway_spec(**gateway)
    found = gateway_problem(service, service.gateway)
    assert found is not None and found.startswith(problem), found


def test_a_valid_gateway_has_no_problem() -> None:
    service = gateway_spec(gatewayRef={"name": "gw"}, modelName="llama 3.1 8b")
    assert gateway_problem(service, service.gateway) is None


# -- discovery of the optional CRDs --------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


class Discovery:
    """A client answering /apis/<group>/<version> from a table, counting the questions."""

    def __init__(self, served: dict[str, list[str]]) -> None:
        self.served = served
        self.asked: list[str] = []

    async def request(self, method: str, path: str, **_: Any) -> Obj:
        self.asked.append(path)
        group_version = path.removeprefix("/apis/")
        if group_version not in self.served:
            raise NotFound(404, "NotFound", "the server could not find the requested resource")
        names = self.served[group_version]
        return {"resources": [{"name": n} for n in names] + [{"name": f"{names[0]}/status"}]}


SLO_TYPE = ResourceType("pyrra.dev", "v1alpha1", "servicelevelobjectives", "ServiceLevelObjective")


async def test_an_absent_type_is_asked_again_after_a_while_a_served_one_is_believed() -> None:
    client, clock = Discovery({}), FakeClock()
    served = ServedTypes(client, clock)  # type: ignore[arg-type]
    assert await served.missing([SLO_TYPE]) == [SLO_TYPE]
    assert await served.missing([SLO_TYPE]) == [SLO_TYPE]
    assert len(client.asked) == 1  # not one request per reconcile
    client.served["pyrra.dev/v1alpha1"] = ["servicelevelobjectives"]  # Pyrra installed
    clock.now += ABSENT_RECHECK + 1
    assert await served.missing([SLO_TYPE]) == []
    clock.now += 10 * ABSENT_RECHECK
    assert await served.missing([SLO_TYPE]) == []
    assert len(client.asked) == 2
    served.forget(SLO_TYPE)  # a write answered 404: the CRD may be gone
    del client.served["pyrra.dev/v1alpha1"]
    assert await served.missing([SLO_TYPE]) == [SLO_TYPE]
    assert len(client.asked) == 3


async def test_one_type_of_a_group_missing_is_told_apart_from_the_others() -> None:
    client, clock = Discovery({AI_SERVICE_BACKEND.api_version: ["aiservicebackends"]}), FakeClock()
    served = ServedTypes(client, clock)  # type: ignore[arg-type]
    assert await served.missing([BACKEND, AI_SERVICE_BACKEND, AI_GATEWAY_ROUTE]) == [
        BACKEND,
        AI_GATEWAY_ROUTE,
    ]
    assert await served.missing([AI_SERVICE_BACKEND]) == []
    client.served["aigateway.envoyproxy.io/v1beta1"].append("aigatewayroutes")
    clock.now += ABSENT_RECHECK + 1
    assert await served.missing([AI_GATEWAY_ROUTE]) == []


# -- the availability gauge ----------------------------------------------------------------


def test_ready_gauge_is_one_while_ready_and_zero_otherwise() -> None:
    registry = CollectorRegistry()
    collector = DomainCollector(registry)

    def service(name: str, **status: Any) -> Obj:
        return {"metadata": {"name": name, "namespace": "team-a"}, "spec": {}, "status": status}

    ready = [{"type": "Ready", "status": "True"}]
    collector.bind(
        lambda: DomainObjects(
            services=[
                service("up", conditions=ready),
                service("down", conditions=[{"type": "Ready", "status": "False"}]),
                service("new"),
                service("odd", conditions="Ready"),
            ]
        )
    )
    values = {
        s.labels["inferenceservice"]: s.value
        for family in registry.collect()
        for s in family.samples
        if s.name == READY_METRIC
    }
    assert values == {"up": 1.0, "down": 0.0, "new": 0.0, "odd": 0.0}


# -- the operator's switch and its RBAC ----------------------------------------------------


def expand(rules: tuple[PolicyRule, ...]) -> set[tuple[str, str, str]]:
    return {(r.group, res, v) for r in rules for res in r.resources for v in r.verbs}


def test_chart_pyrra_enabled_passes_the_flag_and_grants_the_slo_rules() -> None:
    def args(values: Obj) -> list[str]:
        container = find(render(values), "Deployment")["spec"]["template"]["spec"]["containers"][0]
        return [a for a in container["args"] if "pyrra" in a]

    assert args({}) == []
    assert parse(["run"]).enable_pyrra_slo is False
    on = {"pyrra": {"enabled": True}}
    assert args(on) == ["--enable-pyrra-slo"]
    assert parse(args(on)).enable_pyrra_slo is True  # the controller's own parser
    role = rules_of(find(render(on), "ClusterRole"))
    assert role == expand(CLUSTER_RULES) | expand(PYRRA_RULES)
    assert not {r for r in rules_of(find(render({}), "ClusterRole")) if r[0] == "pyrra.dev"}
    # The gateway has no switch (LLMKube has none): its rules are always granted.
    assert ("aigateway.envoyproxy.io", "aigatewayroutes", "patch") in rules_of(
        find(render({}), "ClusterRole")
    )
    with pytest.raises(Exception, match="enabled"):
        render({"pyrra": {"enabled": "yes"}})
