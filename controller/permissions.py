"""The API permissions the controller needs, and nothing more.

The Helm chart's ClusterRole and Role are checked against this list, and a test runs
the controller and checks every request it made is covered by the chart's rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from .resources import GROUP

READ = ("get", "list", "watch")


@dataclass(frozen=True)
class PolicyRule:
    group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]


CLUSTER_RULES: tuple[PolicyRule, ...] = (
    PolicyRule(GROUP, ("models", "inferenceservices", "gpuquotas"), READ),
    PolicyRule(
        GROUP, ("models/status", "inferenceservices/status", "gpuquotas/status"), ("patch",)
    ),
    # DRA objects are the user's and the drivers': the controller reads them (claims and
    # templates exist, their allocations; classes and slices for AcceleratorReady), and
    # writes only the ResourceClaimTemplates it makes for the user (managed claims, owned
    # by their services; an older one is deleted once unused).
    PolicyRule("resource.k8s.io", ("resourceclaims", "deviceclasses", "resourceslices"), READ),
    # DeviceTaintRules (KEP-5055) name the taints an admin put on devices: listed, not
    # watched (the type may be served in no version), when a pending or evicted pod's
    # devices are explained.
    PolicyRule("resource.k8s.io", ("devicetaintrules",), ("list",)),
    PolicyRule(
        "resource.k8s.io", ("resourceclaimtemplates",), (*READ, "create", "patch", "delete")
    ),
    # Managed claims: whether any node advertises the vendor's device-plugin resource.
    PolicyRule("", ("nodes",), READ),
    # Owned objects are written with server-side apply: `patch`, plus `create` for an
    # apply that creates (kube-apiserver authorizes that as create too).
    PolicyRule("apps", ("deployments",), (*READ, "create", "patch")),
    PolicyRule("", ("services",), (*READ, "create", "patch")),
    # multiNode member pods are applied directly, and replaced (deleted) when they change.
    PolicyRule("", ("pods",), (*READ, "create", "patch", "delete")),
    # An Event's create answers 409 when an earlier run (before a restart) or another
    # replica wrote it: it is read (`get`) to continue its count, then patched.
    PolicyRule("", ("events",), ("get", "create", "patch")),
    # spec.autoscaling: the service's HPA, removed when autoscaling is cleared or suspended.
    PolicyRule("autoscaling", ("horizontalpodautoscalers",), (*READ, "create", "patch", "delete")),
    # spec.disruption: the service's PodDisruptionBudget, removed when not protecting.
    PolicyRule("policy", ("poddisruptionbudgets",), (*READ, "create", "patch", "delete")),
    # spec.maxPodLifetimeSeconds: expired pods are evicted (budgets are respected).
    PolicyRule("", ("pods/eviction",), ("create",)),
    # A GPUQuota's selector matches Namespace labels (as LLMKube's gpuquota controller).
    PolicyRule("", ("namespaces",), READ),
    # spec.prefetch: the Model's loader Job (watched: its status is the Prefetch condition).
    PolicyRule("batch", ("jobs",), (*READ, "create", "patch")),
    # spec.endpoint.gateway: the route's Backend, AIServiceBackend and AIGatewayRoute,
    # applied (not watched: their CRDs may be absent), removed when disabled.
    PolicyRule("gateway.envoyproxy.io", ("backends",), ("get", "create", "patch", "delete")),
    PolicyRule(
        "aigateway.envoyproxy.io",
        ("aiservicebackends", "aigatewayroutes"),
        ("get", "create", "patch", "delete"),
    ),
    # The model cache PVC: created once, never read or changed (chart: only with
    # modelCache.enabled).
    PolicyRule("", ("persistentvolumeclaims",), ("create",)),
)
# With --enable-pyrra-slo (chart pyrra.enabled) only: spec.slo's ServiceLevelObjectives,
# listed by label to remove the stale ones (renamed, indicator switched, slo cleared).
PYRRA_RULES: tuple[PolicyRule, ...] = (
    PolicyRule(
        "pyrra.dev", ("servicelevelobjectives",), ("get", "list", "create", "patch", "delete")
    ),
)
# In the controller's own namespace, for leader election only.
LEADER_ELECTION_RULES: tuple[PolicyRule, ...] = (
    PolicyRule("coordination.k8s.io", ("leases",), ("get", "create", "update")),
)
