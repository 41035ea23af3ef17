"""The Helm chart rendered by Helm's own engine (helm-python-sdk), and lookups in it."""

from __future__ import annotations

from pathlib import Path

from helm_python.chart import Chart

from app.manifests import load
from objtypes import Obj

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "llmkube"
CRD_DIR = CHART / "crds"
EXAMPLES = ROOT / "examples"
NAMESPACE = "llmkube-system"
KUBE_VERSION = "1.34"  # resource.k8s.io/v1 is served from 1.34 on


def rendered(values: Obj | None = None) -> dict[str, str]:
    """Template path -> text, as `helm template` renders it (values.schema.json applies)."""
    out: dict[str, str] = Chart.load(str(CHART)).render(
        values=values or {}, name="llmkube", namespace=NAMESPACE
    )
    return out


def render(values: Obj | None = None) -> list[Obj]:
    out = rendered(values)
    docs: list[Obj] = []
    for path, text in sorted(out.items()):
        if path.endswith(".yaml"):
            docs.extend(load(text))
    return docs


def find(docs: list[Obj], kind: str, name: str | None = None) -> Obj:
    matches = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(matches) == 1, f"{kind} {name}: {len(matches)} found"
    return matches[0]


def kinds(docs: list[Obj]) -> set[str]:
    return {d["kind"] for d in docs}


def controller_args(docs: list[Obj]) -> list[str]:
    args: list[str] = find(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


def rules_of(role: Obj) -> set[tuple[str, str, str]]:
    return {
        (g, r, v)
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


# The chart's values as the tests vary them: defaults, and each switch set another way.
VARIANTS: list[Obj] = [
    {},
    {
        "replicas": 3,
        "metrics": {"serviceMonitor": {"enabled": True}},
        "dashboard": {"enabled": True},
    },
    {
        "webhook": {"enabled": False},
        "watchNamespace": "team-a",
        "serviceAccount": {"create": False},
    },
    {
        "webhook": {
            "certManager": {"enabled": False},
            "certSecretName": "my-tls",
            "caBundle": "LS0tLS1CRUdJTg==",
        },
        "kueue": {
            "deviceClassMappings": [
                {"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]}
            ]
        },
    },
    {
        "replicas": 2,
        "metrics": {
            "prometheusRule": {"enabled": True},
            "serviceMonitor": {"enabled": True},
            "scrapeAnnotations": True,
        },
        "podDisruptionBudget": {"enabled": True},
    },
]
