"""The CEL rules in the CRDs and their Python twins in api/ agree, object by object.

The apiserver evaluates the CEL; the controller and the webhook evaluate the Python.
cel-python evaluates the same CEL text here on every object the rules apply to.
"""

from __future__ import annotations

from typing import Any

import celpy
import pytest
import yaml
from celpy.adapter import json_to_cel

from api import gpuquota, inferenceservice, model
from api.schema import Array, Node, Object, Rule
from objtypes import Obj
from tests.support.paths import DATA

CLAIM = {"name": "g", "resourceClaimTemplateName": "t"}
MEMBERS = [{"node": "a", "fabric": {"address": "10.0.0.1"}}, {"node": "b"}]
HEADLESS = [{"node": "a"}, {"node": "b"}]
ISVC = inferenceservice.SPEC


def rule_sites(node: Node, value: Any) -> list[tuple[Rule, Obj]]:
    """Every (rule, object it applies to) in value, defaults applied as the apiserver does."""
    sites: list[tuple[Rule, Obj]] = []
    if isinstance(node, Object) and isinstance(value, dict):
        filled = dict(value)
        for key, child in node.fields.items():
            if key not in filled and child.default_value() is not None:
                filled[key] = child.default_value()
            if key in filled:
                sites += rule_sites(child, filled[key])
        sites += [(r, filled) for r in node.rules]
    elif isinstance(node, Array) and isinstance(value, list):
        for item in value:
            sites += rule_sites(node.items, item)
    return sites


CASES: list[tuple[Object, Obj]] = [
    (model.SPEC, {"source": "org/m", "hardware": {"gpu": {"resourceClaims": [CLAIM]}}}),
    (
        model.SPEC,
        {"source": "o/m", "hardware": {"gpu": {"resourceName": "a/b", "resourceClaims": [CLAIM]}}},
    ),
    (model.SPEC, {"source": "o/m", "hardware": {"gpu": {"resourceName": "a/b"}}}),
    (model.SPEC, {"source": "o/m", "hardware": {"gpu": {"resourceClaims": [{"name": "g"}]}}}),
    (
        model.SPEC,
        {
            "source": "o/m",
            "hardware": {
                "gpu": {
                    "resourceClaims": [
                        {"name": "g", "resourceClaimName": "c", "resourceClaimTemplateName": "t"}
                    ]
                }
            },
        },
    ),
    (inferenceservice.SPEC, {"modelRef": "m"}),
    (
        inferenceservice.SPEC,
        {"modelRef": "m", "runtime": "vllm", "multiNode": {"members": MEMBERS}},
    ),
    (inferenceservice.SPEC, {"modelRef": "m", "multiNode": {"members": MEMBERS}}),
    (
        inferenceservice.SPEC,
        {"modelRef": "m", "runtime": "vllm", "replicas": 2, "multiNode": {"members": MEMBERS}},
    ),
    (
        inferenceservice.SPEC,
        {
            "modelRef": "m",
            "runtime": "vllm",
            "multiNode": {"members": [{"node": "a"}, {"node": "b"}]},
        },
    ),
    (
        inferenceservice.SPEC,
        {"modelRef": "m", "resources": {"gpuSharing": {"mode": "partitioned"}}},
    ),
    (
        inferenceservice.SPEC,
        {"modelRef": "m", "resources": {"gpuSharing": {"mode": "partitioned", "profile": "1g"}}},
    ),
    (inferenceservice.SPEC, {"modelRef": "m", "resources": {"gpuSharing": {}}}),
    (
        inferenceservice.SPEC,
        {"modelRef": "m", "resources": {"gpuSharing": {"mode": "shared", "memoryLimitGiB": 8}}},
    ),
    (inferenceservice.SPEC, {"modelRef": "m", "resources": {"gpuSharing": {"memoryLimitGiB": 8}}}),
    (inferenceservice.SPEC, {"modelRef": "m", "cacheTypeV": "q8_0", "flashAttention": False}),
    (inferenceservice.SPEC, {"modelRef": "m", "cacheTypeV": "q8_0", "flashAttention": True}),
    (inferenceservice.SPEC, {"modelRef": "m", "cacheTypeV": "f16", "flashAttention": False}),
    (
        inferenceservice.SPEC,
        {"modelRef": "m", "runtime": "vllm", "cacheTypeV": "q4_0", "flashAttention": False},
    ),
    (gpuquota.SPEC, {"gpuCount": 1}),
    (gpuquota.SPEC, {"gpuCount": 1, "namespaceRef": "a"}),
    (gpuquota.SPEC, {"gpuCount": 1, "selector": {}}),
    (gpuquota.SPEC, {"gpuCount": 1, "namespaceRef": "a", "selector": {}}),
]
SCHEMAS = {
    "Model": model.SPEC,
    "InferenceService": inferenceservice.SPEC,
    "GPUQuota": gpuquota.SPEC,
}
for path in [DATA / "all-fields.yaml", *sorted((DATA / "llmkube-samples").glob("*.yaml"))]:
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and doc.get("kind") in SCHEMAS:
            CASES.append((SCHEMAS[doc["kind"]], doc["spec"]))


def test_every_rule_is_exercised_both_ways() -> None:
    outcomes: dict[str, set[bool]] = {}
    for schema, spec in CASES:
        for rule, obj in rule_sites(schema, spec):
            outcomes.setdefault(rule.cel, set()).add(rule.holds(obj))
    all_rules = {r.cel for s in SCHEMAS.values() for r, _ in _all_rules(s)}
    assert set(outcomes) == all_rules
    assert all(v == {True, False} for v in outcomes.values()), outcomes


def _all_rules(node: Node) -> list[tuple[Rule, None]]:
    found: list[tuple[Rule, None]] = []
    if isinstance(node, Object):
        found += [(r, None) for r in node.rules]
        for child in node.fields.values():
            found += _all_rules(child)
    elif isinstance(node, Array):
        found += _all_rules(node.items)
    return found


@pytest.mark.parametrize(("schema", "spec"), CASES)
def test_cel_and_python_agree(schema: Object, spec: Obj) -> None:
    env = celpy.Environment()
    for rule, obj in rule_sites(schema, spec):
        program = env.program(env.compile(rule.cel))
        cel = bool(program.evaluate({"self": json_to_cel(obj)}))
        assert cel == rule.holds(obj), (rule.cel, obj)
