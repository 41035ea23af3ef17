"""LLMKube's manifests, unchanged: the CRDs store every field, api/ accepts them, and the
committed CRDs are exactly what api/ generates.

tests/data/llmkube-samples/ holds the in-scope files of LLMKube's config/samples/
(Model and InferenceService documents; Apache-2.0, LICENSE beside them).

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_llmkube_api.py.
"""

from __future__ import annotations

from typing import Any

import yaml

from api import crdgen, parse_gpu_quota, parse_inference_service, parse_model
from app.manifests import CRD_DIR
from objtypes import Obj
from tests.support.paths import DATA

SAMPLES = DATA / "llmkube-samples"
IN_SCOPE = ("Model", "InferenceService", "GPUQuota")


def sample_docs() -> list[tuple[str, Obj]]:
    docs = []
    for path in sorted(SAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") in IN_SCOPE:
                docs.append((path.name, doc))
    return docs


def spec_schema(kind: str) -> Obj:
    for path in CRD_DIR.glob("*.yaml"):
        crd = yaml.safe_load(path.read_text())
        if crd["spec"]["names"]["kind"] == kind:
            root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
            spec: Obj = root["properties"]["spec"]
            return spec
    raise KeyError(kind)


def pruned(schema: Obj, value: Any, path: str) -> list[str]:
    """The paths a structural schema would prune from value (as the apiserver does)."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    if isinstance(value, dict) and schema.get("type") == "object":
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        out = []
        for key, v in value.items():
            if props is not None and key in props:
                out += pruned(props[key], v, f"{path}.{key}")
            elif isinstance(extra, dict):
                out += pruned(extra, v, f"{path}.{key}")
            elif props is not None or extra is None:
                out.append(f"{path}.{key}")
        return out
    if isinstance(value, list) and "items" in schema:
        return [p for i, v in enumerate(value) for p in pruned(schema["items"], v, f"{path}[{i}]")]
    return []


def test_committed_crds_are_what_api_generates() -> None:
    for name, text in crdgen.generated().items():
        assert (CRD_DIR / name).read_text() == text, f"{name} is stale: run `make crds`"
    assert crdgen.main(["--check", str(CRD_DIR)]) == 0


def test_crds_carry_names_columns_scale_and_typed_conditions() -> None:
    crds = {
        k.kind: yaml.safe_load((CRD_DIR / n).read_text())
        for k, n in zip(crdgen.KINDS, crdgen.generated(), strict=True)
    }
    short = {k: c["spec"]["names"]["shortNames"] for k, c in crds.items()}
    assert short == {"Model": ["mdl"], "InferenceService": ["isvc"], "GPUQuota": ["gq"]}
    for kind, c in crds.items():
        assert c["spec"]["names"]["categories"] == ["llmkube"]
        version = c["spec"]["versions"][0]
        cols = {col["name"]: col for col in version["additionalPrinterColumns"]}
        assert cols["Ready"]["jsonPath"] == '.status.conditions[?(@.type=="Ready")].status'
        assert cols["Reason"]["priority"] == 1
        schema = version["schema"]["openAPIV3Schema"]["properties"]
        conditions = schema["status"]["properties"]["conditions"]
        assert conditions["x-kubernetes-list-type"] == "map"
        assert conditions["x-kubernetes-list-map-keys"] == ["type"]
        assert set(conditions["items"]["required"]) == {
            "type",
            "status",
            "lastTransitionTime",
            "reason",
            "message",
        }
        for part in ("spec", "status"):
            assert "x-kubernetes-preserve-unknown-fields" not in schema[part], (kind, part)
    isvc = crds["InferenceService"]["spec"]["versions"][0]
    assert isvc["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    }
    cols = {col["name"]: col for col in isvc["additionalPrinterColumns"]}
    assert cols["Endpoint"]["priority"] == 1
    spec = isvc["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["replicas"] == {
        "type": "integer",
        "format": "int32",
        "minimum": 0,
        "maximum": 10,
        "default": 1,
    }
    model_spec = crds["Model"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    hw = model_spec["properties"]["spec"]["properties"]["hardware"]["properties"]
    assert hw["accelerator"]["enum"] == ["cpu", "metal", "cuda", "rocm", "intel", "vulkan"]
    assert hw["accelerator"]["default"] == "cpu"
    claims = hw["gpu"]["properties"]["resourceClaims"]
    assert claims["maxItems"] == 16
    assert claims["items"]["x-kubernetes-validations"][0]["rule"] == (
        "has(self.resourceClaimName) != has(self.resourceClaimTemplateName)"
    )
    assert "resourceName" in hw["gpu"]["x-kubernetes-validations"][0]["rule"]
    quota = crds["GPUQuota"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert quota["properties"]["spec"]["x-kubernetes-validations"][0]["rule"] == (
        "has(self.selector) != has(self.namespaceRef)"
    )


def test_every_sample_field_is_in_the_schema_and_accepted() -> None:
    docs = sample_docs()
    assert len(docs) == 45, "23 Models and 22 InferenceServices in LLMKube's samples"
    for name, doc in docs:
        assert pruned(spec_schema(doc["kind"]), doc["spec"], "spec") == [], name
        parse = parse_model if doc["kind"] == "Model" else parse_inference_service
        parse(doc["spec"])  # raises InvalidSpec naming the field


def test_contract_field_groups_are_stored_not_pruned() -> None:
    """A manifest with every field group of the contract (§1a-1e) is stored whole."""
    text = (DATA / "all-fields.yaml").read_text()
    parsers = {"Model": parse_model, "InferenceService": parse_inference_service}
    for doc in yaml.safe_load_all(text):
        assert pruned(spec_schema(doc["kind"]), doc["spec"], "spec") == [], doc["kind"]
        parsers.get(doc["kind"], parse_gpu_quota)(doc["spec"])
    # The check itself sees a field the schema does not know.
    bogus = {"source": "org/m", "hardware": {"gpu": {"nodes": ["a"]}}}
    assert pruned(spec_schema("Model"), bogus, "spec") == ["spec.hardware.gpu.nodes"]
