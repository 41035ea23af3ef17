"""The Helm chart: rendered by Helm's own engine (helm-python-sdk, Helm v4), linted,
applied with kubectl (server dry run against the test API server) and validated
against Kubernetes' published JSON schemas.

With a helm binary the same rendering is: helm template llmkube charts/llmkube -n llmkube-system

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_chart.py.
"""

from __future__ import annotations

import json
import re

import jsonschema
import kubernetes_validate
import pytest
import yaml
from helm_python.chart import lint

from app.cli import concurrency, host_path_roots, parse
from app.manifests import load
from controller.permissions import CLUSTER_RULES, LEADER_ELECTION_RULES, PolicyRule
from metrics import ControllerMetrics
from objtypes import Obj
from tests.support.chart import (
    CHART,
    CRD_DIR,
    EXAMPLES,
    KUBE_VERSION,
    NAMESPACE,
    VARIANTS,
    controller_args,
    find,
    kinds,
    render,
    rendered,
    rules_of,
)
from webhook.server import PATH


def test_lint_is_clean_for_every_variant() -> None:
    for values in VARIANTS:
        result = lint(str(CHART), values, strict=True, namespace=NAMESPACE)
        assert result["errors"] == [], (values, result)
        assert [m for m in result["messages"] if m["severity"] > 1] == [], (values, result)


@pytest.mark.parametrize("values", VARIANTS)
def test_rendered_manifests_match_kubernetes_schemas(values: Obj) -> None:
    for doc in render(values):
        if doc["apiVersion"].startswith(("monitoring.coreos.com", "cert-manager.io")):
            continue  # third-party CRDs: not in Kubernetes' schemas; checked by kubectl below
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)


def test_crds_and_examples_match_kubernetes_schemas() -> None:
    for path in sorted(CRD_DIR.glob("*.yaml")):
        for doc in load(path.read_text()):
            kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for doc in load(path.read_text()):
            if doc["apiVersion"] == "resource.k8s.io/v1":
                kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)


def crd_schema(kind: str) -> Obj:
    for path in CRD_DIR.glob("*.yaml"):
        crd = load(path.read_text())[0]
        if crd["spec"]["names"]["kind"] == kind:
            schema: Obj = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
            return schema
    raise KeyError(kind)


def validator(kind: str) -> jsonschema.Draft4Validator:
    """CRD schemas are OpenAPI 3.0: draft 4 semantics (boolean exclusiveMinimum)."""
    return jsonschema.Draft4Validator(crd_schema(kind))


def test_examples_match_their_crd_schemas_and_bad_values_do_not() -> None:
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for doc in load(path.read_text()):
            if doc["apiVersion"].startswith("inference.llmkube.dev"):
                validator(doc["kind"]).validate(doc)
    model = next(d for d in load((EXAMPLES / "multi-gpu.yaml").read_text()) if d["kind"] == "Model")
    model["spec"]["hardware"]["gpu"]["count"] = -1
    with pytest.raises(jsonschema.ValidationError, match="-1 is less than the minimum of 0"):
        validator("Model").validate(model)
    model["spec"]["hardware"]["gpu"]["count"] = 2
    model["spec"]["hardware"]["gpu"]["vendor"] = "acme"
    with pytest.raises(jsonschema.ValidationError, match="'acme' is not one of"):
        validator("Model").validate(model)


def test_leader_election_on_by_default_only_with_several_replicas() -> None:
    one = render({})
    assert "--leader-elect" not in controller_args(one)
    assert "Role" not in kinds(one)
    three = render({"replicas": 3})
    assert "--leader-elect" in controller_args(three)
    assert f"--lease-namespace={NAMESPACE}" in controller_args(three)
    assert find(three, "Role")["metadata"]["namespace"] == NAMESPACE
    assert "--leader-elect" not in controller_args(
        render({"replicas": 3, "leaderElection": {"enabled": False}})
    )
    assert "--leader-elect" in controller_args(render({"leaderElection": {"enabled": True}}))


def test_values_reach_the_deployment() -> None:
    docs = render(
        {
            "image": {"repository": "registry.local/llmkube", "tag": "v9"},
            "logLevel": "debug",
            "workers": 8,
            "watchNamespace": "team-a",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
        }
    )
    pod = find(docs, "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == "registry.local/llmkube:v9"
    assert {"--zap-log-level=debug", "--workers=8", "--namespace=team-a"} <= set(container["args"])
    assert container["resources"] == {
        "requests": {"cpu": "1", "memory": "1Gi"},
        "limits": {"memory": "2Gi"},
    }
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True


def test_max_concurrent_reconciles_value_reaches_the_flag() -> None:
    def flag(values: Obj | None) -> list[str]:
        container = find(render(values), "Deployment")["spec"]["template"]["spec"]["containers"][0]
        return [a for a in container["args"] if a.startswith("--max-concurrent-reconciles=")]

    assert flag(None) == ["--max-concurrent-reconciles=gpuquota=2"]  # the chart's default
    (arg,) = flag({"maxConcurrentReconciles": {"model": 32, "inferenceservice": 8}})
    # The controller's own parser reads what the chart renders (gpuquota=2 is merged in).
    assert concurrency(arg.partition("=")[2]) == {"gpuquota": 2, "inferenceservice": 8, "model": 32}
    assert flag({"maxConcurrentReconciles": None}) == []


def test_allowed_host_path_roots_value_reaches_the_flag() -> None:
    def flag(values: Obj | None) -> list[str]:
        container = find(render(values), "Deployment")["spec"]["template"]["spec"]["containers"][0]
        return [a for a in container["args"] if a.startswith("--allowed-host-path-roots")]

    assert flag(None) == []  # LLMKube's secure default: no host-path sources
    (arg,) = flag({"modelSource": {"allowedHostPathRoots": ["/mnt/models", "/srv/llm"]}})
    # The controller's own parser reads what the chart renders.
    assert host_path_roots(arg.partition("=")[2]) == ("/mnt/models", "/srv/llm")
    with pytest.raises(Exception, match="allowedHostPathRoots"):
        render({"modelSource": {"allowedHostPathRoots": ["mnt/models"]}})


def test_hf_endpoint_value_reaches_the_flag() -> None:
    def flag(values: Obj | None) -> list[str]:
        container = find(render(values), "Deployment")["spec"]["template"]["spec"]["containers"][0]
        return [a for a in container["args"] if a.startswith("--hf-endpoint")]

    assert flag(None) == []  # the controller's default, https://huggingface.co
    (arg,) = flag({"modelSource": {"hfEndpoint": "https://hf-mirror.example"}})
    # The controller's own parser reads what the chart renders.
    assert parse([arg]).hf_endpoint == "https://hf-mirror.example"
    with pytest.raises(Exception, match="hfEndpoint"):
        render({"modelSource": {"hfEndpoint": "ftp://mirror"}})


def test_any_extra_volume_host_path_value_reaches_the_flag() -> None:
    def flags(values: Obj | None) -> list[str]:
        container = find(render(values), "Deployment")["spec"]["template"]["spec"]["containers"][0]
        return [a for a in container["args"] if a.startswith("--allow-any-extra-volume")]

    assert flags(None) == []  # off by default: extraVolumes' host paths only under the roots
    on = flags({"servingPods": {"allowAnyExtraVolumeHostPath": True}})
    assert on == ["--allow-any-extra-volume-host-path"]
    assert parse(on).allow_any_extra_volume_host_path is True  # the controller's own parser


def test_managed_dra_claims_values_reach_the_flags() -> None:
    def flags(values: Obj | None) -> list[str]:
        container = find(render(values), "Deployment")["spec"]["template"]["spec"]["containers"][0]
        return [a for a in container["args"] if "dra-" in a]

    assert flags(None) == ["--managed-dra-claims=true"]
    assert parse(flags(None)).managed_dra_claims is True
    off = flags({"managedDRAClaims": {"enabled": False, "deviceClass": "mig.nvidia.com"}})
    assert off == ["--managed-dra-claims=false", "--dra-device-class=mig.nvidia.com"]
    # The controller's own parser reads what the chart renders.
    args = parse(off)
    assert args.managed_dra_claims is False and args.dra_device_class == "mig.nvidia.com"
    with pytest.raises(Exception, match="deviceClass"):
        render({"managedDRAClaims": {"deviceClass": "Bad Class"}})
    with pytest.raises(SystemExit):
        parse(["--dra-device-class=Bad Class"])


def test_default_fsgroup_value_reaches_the_flag() -> None:
    def flags(values: Obj | None) -> list[str]:
        container = find(render(values), "Deployment")["spec"]["template"]["spec"]["containers"][0]
        return [a for a in container["args"] if a.startswith("--default-fsgroup")]

    assert flags(None) == ["--default-fsgroup=102"]  # the loader image's group, as LLMKube
    (arg,) = flags({"servingPods": {"defaultFSGroup": 0}})
    assert parse([arg]).default_fsgroup == 0  # the controller's own parser: none
    with pytest.raises(Exception, match="defaultFSGroup"):
        render({"servingPods": {"defaultFSGroup": -1}})


def expand(rules: tuple[PolicyRule, ...]) -> set[tuple[str, str, str]]:
    return {(r.group, res, v) for r in rules for res in r.resources for v in r.verbs}


def test_rbac_is_exactly_what_the_controller_declares() -> None:
    docs = render({"replicas": 2})
    assert rules_of(find(docs, "ClusterRole")) == expand(CLUSTER_RULES)
    assert rules_of(find(docs, "Role")) == expand(LEADER_ELECTION_RULES)
    # DRA objects are the user's and the drivers': read only, but for the templates made
    # for the user (managed claims).
    dra = {(r, v) for g, r, v in rules_of(find(docs, "ClusterRole")) if g == "resource.k8s.io"}
    assert {v for r, v in dra if r != "resourceclaimtemplates"} == {"get", "list", "watch"}
    assert {v for r, v in dra if r == "resourceclaimtemplates"} == {
        "get",
        "list",
        "watch",
        "create",
        "patch",
        "delete",
    }
    binding = find(docs, "ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "llmkube", "namespace": NAMESPACE}
    ]


def test_webhook_configuration_targets_the_served_path_and_kinds() -> None:
    docs = render({})
    config = find(docs, "ValidatingWebhookConfiguration")
    hook = config["webhooks"][0]
    assert hook["clientConfig"]["service"] == {
        "name": "llmkube",
        "namespace": NAMESPACE,
        "path": PATH,
        "port": 443,
    }
    assert hook["admissionReviewVersions"] == ["v1"] and hook["sideEffects"] == "None"
    assert hook["rules"][0]["resources"] == ["models", "inferenceservices", "gpuquotas"]
    assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        f"{NAMESPACE}/llmkube-webhook"
    )
    cert = find(docs, "Certificate")
    volume = find(docs, "Deployment")["spec"]["template"]["spec"]["volumes"][0]
    assert volume["secret"]["secretName"] == cert["spec"]["secretName"]
    assert "llmkube.llmkube-system.svc" in cert["spec"]["dnsNames"]
    service_ports = {p["name"]: p for p in find(docs, "Service")["spec"]["ports"]}
    assert service_ports["webhook"]["port"] == 443
    assert kinds(render({"webhook": {"enabled": False}})).isdisjoint(
        {"ValidatingWebhookConfiguration", "Certificate", "Issuer"}
    )
    with pytest.raises(Exception, match="certSecretName is required when"):
        render({"webhook": {"certManager": {"enabled": False}, "caBundle": "Y2E="}})
    with pytest.raises(Exception, match="caBundle is required when"):
        render({"webhook": {"certManager": {"enabled": False}, "certSecretName": "tls"}})


def test_service_monitor_and_dashboard_are_values_gated() -> None:
    assert kinds(render({})).isdisjoint({"ServiceMonitor", "ConfigMap"})
    docs = render(
        {
            "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}},
            "dashboard": {"enabled": True},
        }
    )
    monitor = find(docs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["endpoints"][0]["port"] == "http-metrics"
    assert monitor["spec"]["selector"]["matchLabels"] == find(docs, "Service")["spec"]["selector"]
    dashboard = find(docs, "ConfigMap")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["llmkube-controller.json"])["uid"] == "llmkube-controller"


def test_dashboard_queries_only_exported_metrics() -> None:
    dashboard = json.loads((CHART / "files" / "dashboard.json").read_text())
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}
    exported = {
        family.name + suffix
        for family in ControllerMetrics().registry.collect()
        for suffix in suffixes[family.type]
    }
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    families_re = (
        r"\b((?:workqueue|controller_runtime|leader|llmkube|process|python|rest_client)_\w+)"
    )
    used = {m for e in exprs for m in re.findall(families_re, e)}
    assert used, "the dashboard queries nothing"
    assert used <= exported, used - exported
    families = {re.sub(r"_(bucket|total|count|sum)$", "", m) for m in used}
    assert {
        "workqueue_depth",
        "workqueue_adds",
        "workqueue_retries",
        "controller_runtime_reconcile",
        "controller_runtime_reconcile_errors",
        "controller_runtime_reconcile_time_seconds",
        "process_cpu_seconds",
    } <= families
    assert {
        "process_resident_memory_bytes",
        "rest_client_requests_total",
        "rest_client_request_duration_seconds_bucket",
        "llmkube_gpuquota_used_gpus",
        "llmkube_gpuquota_gpu_count_limit",
        "llmkube_inferenceservice_phase",
        "llmkube_inferenceservice_devices",
    } <= used
    # Not the deprecated name, nor a count of objects plotted as bytes.
    assert not used & {"llmkube_gpuquota_used_gpu_count", "python_gc_objects_collected_total"}
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert "namespace" in variables["namespace"]["query"]
    for expr in exprs:
        if "llmkube_" in expr:
            assert 'namespace=~"$namespace"' in expr, expr


def test_chart_requires_kubernetes_1_34_for_dra() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["kubeVersion"] == ">=1.34.0-0"


@pytest.mark.parametrize(
    ("values", "error"),
    [
        ({"replica": 2}, "additional properties 'replica' not allowed"),
        ({"logLevel": "verbose"}, "logLevel"),
        ({"metrics": {"port": 8080, "portt": 1}}, "additional properties 'portt' not allowed"),
        ({"webhook": {"failurePolicy": "Maybe"}}, "failurePolicy"),
        ({"image": {"pullPolicy": "Sometimes"}}, "pullPolicy"),
        ({"metrics": {"prometheusRule": {"errorRateThreshold": 2}}}, "errorRateThreshold"),
        ({"workers": 0}, "workers"),
    ],
)
def test_values_schema_rejects_unknown_keys_and_values_outside_their_enums(
    values: Obj, error: str
) -> None:
    with pytest.raises(Exception, match=re.escape(error)):
        render(values)


def test_values_schema_is_draft_07_and_closed_everywhere() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(schema)
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    jsonschema.Draft7Validator(schema).validate(defaults)

    def closed(node: Obj, path: str) -> None:
        for key, sub in (node.get("properties") or {}).items():
            # Kubernetes pass-through objects and maps stay open; our own sections are closed.
            if sub.get("type") == "object" and "properties" in sub:
                assert sub.get("additionalProperties") is False, f"{path}.{key}"
                closed(sub, f"{path}.{key}")

    assert schema["additionalProperties"] is False
    closed(schema, "")


def test_probes_and_metrics_use_controller_runtime_flags_and_ports() -> None:
    docs = render({})
    container = find(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert "--metrics-bind-address=:8080" in container["args"]
    assert "--health-probe-bind-address=:8081" in container["args"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["http-metrics"] == 8080 and ports["health"] == 8081
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}


def test_scrape_annotations_are_a_toggle_off_beside_the_service_monitor() -> None:
    def annotations(values: Obj) -> Obj:
        template = find(render(values), "Deployment")["spec"]["template"]
        result: Obj = template["metadata"].get("annotations") or {}
        return result

    assert annotations({})["prometheus.io/scrape"] == "true"
    assert annotations({})["prometheus.io/port"] == "8080"
    monitor = {"serviceMonitor": {"enabled": True}}
    assert "prometheus.io/scrape" not in annotations({"metrics": monitor})
    assert "prometheus.io/scrape" in annotations(
        {"metrics": {**monitor, "scrapeAnnotations": True}}
    )
    assert annotations({"metrics": {"scrapeAnnotations": False}}) == {}
    assert annotations({"metrics": {"scrapeAnnotations": False}, "podAnnotations": {"a": "b"}}) == {
        "a": "b"
    }


ALERTS = {
    "LLMKubeReconcileErrorRateHigh",
    "LLMKubeWorkQueueDepthHigh",
    "LLMKubeLeaderAbsent",
    "LLMKubeControllerMetricsAbsent",
}


def test_prometheus_rule_alerts_on_errors_queue_depth_a_missing_leader_and_no_scrape() -> None:
    assert "PrometheusRule" not in kinds(render({}))
    rule_values = {"metrics": {"prometheusRule": {"enabled": True, "labels": {"release": "p"}}}}
    one = find(render(rule_values), "PrometheusRule")
    assert one["metadata"]["labels"]["release"] == "p"
    # The same alerts with one replica (no leader election) as with three.
    alerts = {r["alert"]: r for g in one["spec"]["groups"] for r in g["rules"]}
    assert set(alerts) == ALERTS
    three = find(render({**rule_values, "replicas": 3}), "PrometheusRule")
    assert {r["alert"] for g in three["spec"]["groups"] for r in g["rules"]} == ALERTS
    assert "> 0.1" in alerts["LLMKubeReconcileErrorRateHigh"]["expr"]
    assert "> 100" in alerts["LLMKubeWorkQueueDepthHigh"]["expr"]
    # Not scraped at all is not "no leader": that alert has no `or vector(0)` fallback.
    assert "vector(" not in alerts["LLMKubeLeaderAbsent"]["expr"]
    assert 'pod=~"llmkube-' in alerts["LLMKubeControllerMetricsAbsent"]["expr"]
    # Every metric an alert queries is one the controller exports.
    exported = {f.name for f in ControllerMetrics().registry.collect()}
    for alert in alerts.values():
        for metric in re.findall(r"\b((?:workqueue|controller_runtime|leader)_\w+)", alert["expr"]):
            assert re.sub(r"_total$", "", metric) in exported, metric
        assert f'namespace="{NAMESPACE}"' in alert["expr"]


def test_pod_disruption_budget_is_optional() -> None:
    assert "PodDisruptionBudget" not in kinds(render({}))
    docs = render({"replicas": 2, "podDisruptionBudget": {"enabled": True}})
    pdb = find(docs, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == find(docs, "Service")["spec"]["selector"]


def test_helm_test_hook_asks_the_services_health_port_for_readyz() -> None:
    docs = render({})
    pod = next(
        d
        for d in docs
        if d["kind"] == "Pod" and d["metadata"]["annotations"].get("helm.sh/hook") == "test"
    )
    script = " ".join(pod["spec"]["containers"][0]["command"])
    assert f"http://llmkube.{NAMESPACE}.svc:8081/readyz" in script
    ports = {p["name"]: p for p in find(docs, "Service")["spec"]["ports"]}
    assert ports["health"]["port"] == 8081 and ports["health"]["targetPort"] == "health"
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True


def test_notes_give_the_guides_first_steps_and_the_crd_upgrade() -> None:
    notes = rendered({})["llmkube/templates/NOTES.txt"]
    for text in (
        "kind: ResourceClaimTemplate",
        "kubectl llmkube deploy",
        "--claim-template one-gpu",
        "kubectl llmkube status",
        "helm test llmkube",
        "resourceClaims and resourceName are mutually exclusive",
        "kubectl apply --server-side -f crds/",
    ):
        assert text in notes, text
    readme = (CHART / "README.md").read_text()
    assert "## Upgrading the CRDs" in readme
