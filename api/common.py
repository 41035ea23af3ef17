"""Schema pieces shared by the kinds: Kubernetes core shapes and metav1.Condition."""

from __future__ import annotations

from .schema import Array, Int, Object, Opaque, Rule, Str, StrMap

GROUP = "inference.llmkube.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

NAME = Str(min_length=1)


def one_of_claim_fields(c: dict[str, object]) -> bool:
    return (c.get("resourceClaimName") is None) != (c.get("resourceClaimTemplateName") is None)


# corev1.PodResourceClaim, with LLMKube's CEL rule on each entry.
RESOURCE_CLAIMS = Array(
    items=Object(
        fields={
            "name": NAME,
            "resourceClaimName": Str(min_length=1),
            "resourceClaimTemplateName": Str(min_length=1),
        },
        required=("name",),
        rules=(
            Rule(
                "has(self.resourceClaimName) != has(self.resourceClaimTemplateName)",
                "set exactly one of resourceClaimName and resourceClaimTemplateName",
                one_of_claim_fields,
            ),
        ),
    ),
    max_items=16,
    map_keys=("name",),
    description="DRA claims for the inference pod (corev1.PodResourceClaim).",
)

TOLERATIONS = Array(
    items=Object(
        fields={
            "key": Str(),
            "operator": Str(enum=("Exists", "Equal")),
            "value": Str(),
            "effect": Str(enum=("NoSchedule", "PreferNoSchedule", "NoExecute")),
            "tolerationSeconds": Int(fmt="int64"),
        }
    )
)

LOCAL_REF = Object(fields={"name": NAME}, required=("name",))
SECRET_KEY_REF = Object(fields={"name": NAME, "key": Str()}, required=("name",))

ENV = Array(
    items=Object(
        fields={
            "name": NAME,
            "value": Str(),
            "valueFrom": Opaque(description="corev1.EnvVarSource"),
        },
        required=("name",),
    )
)

LABELS = StrMap()

CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
CONDITION = Object(
    fields={
        "type": Str(
            pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
        ),
        "status": Str(enum=("True", "False", "Unknown")),
        "observedGeneration": Int(minimum=0, fmt="int64"),
        "lastTransitionTime": Str(),
        "reason": Str(pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"),
        "message": Str(),
    },
    required=("type", "status", "lastTransitionTime", "reason", "message"),
)
CONDITIONS = Array(items=CONDITION, map_keys=("type",), description="metav1.Condition list.")
