"""The body of a server-side apply (reconcilers/writes/apply.py `apply_configuration`):
desired with its type, without a resourceVersion, with the hash of desired; desired
itself is left as it was (it is compared with the live object afterwards, and a builder
may hand the same parts to the next write)."""

from __future__ import annotations

import json

from controller.resources import DEPLOYMENT
from reconcilers.writes.apply import HASH_ANNOTATION, apply_configuration, desired_hash


def test_the_body_carries_the_hash_and_desired_is_left_as_it_was() -> None:
    desired = {
        "metadata": {
            "name": "chat",
            "namespace": "team",
            "resourceVersion": "7",
            "annotations": {"a": "1"},
        },
        "spec": {"template": {"spec": {"containers": [{"name": "vllm", "args": ["--x"]}]}}},
        "status": {"replicas": 1},
    }
    before = json.dumps(desired, sort_keys=True)
    body = apply_configuration(DEPLOYMENT, desired)
    assert json.dumps(desired, sort_keys=True) == before
    assert body["apiVersion"] == "apps/v1" and body["kind"] == "Deployment"
    assert "status" not in body and "resourceVersion" not in body["metadata"]
    assert body["metadata"]["annotations"] == {"a": "1", HASH_ANNOTATION: desired_hash(desired)}
    assert body["spec"] == desired["spec"]


def test_desired_without_annotations_gets_only_the_hash() -> None:
    desired = {"metadata": {"name": "chat", "namespace": "team"}, "spec": {}}
    body = apply_configuration(DEPLOYMENT, desired)
    assert body["metadata"]["annotations"] == {HASH_ANNOTATION: desired_hash(desired)}
    assert desired == {"metadata": {"name": "chat", "namespace": "team"}, "spec": {}}
