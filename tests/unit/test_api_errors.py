"""ApiError built from the apiserver's Status bodies, as kube-apiserver writes them."""

from __future__ import annotations

import json

from controller.errors import NotFound, error_from

# kube-apiserver 1.34's answer to a status PATCH of a custom resource that is gone
# (apimachinery errors.NewNotFound with the resource's GroupResource).
CUSTOM_GONE = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": 'inferenceservices.inference.llmkube.dev "ghost" not found',
    "reason": "NotFound",
    "details": {"name": "ghost", "group": "inference.llmkube.dev", "kind": "inferenceservices"},
    "code": 404,
}
# Its answer to a create in a namespace that does not exist: the core group is left out.
NAMESPACE_GONE = {
    **CUSTOM_GONE,
    "message": 'namespaces "team-a" not found',
    "details": {"name": "team-a", "kind": "namespaces"},
}
# A path it does not serve names no object.
NOT_SERVED = {
    **CUSTOM_GONE,
    "message": "the server could not find the requested resource",
    "details": {},
}


def test_a_not_found_names_the_object_its_status_details_name() -> None:
    e = error_from(404, json.dumps(CUSTOM_GONE))
    assert isinstance(e, NotFound)
    assert e.names("inference.llmkube.dev", "inferenceservices", "ghost")
    assert not e.names("inference.llmkube.dev", "inferenceservices", "kept")
    assert not e.names("inference.llmkube.dev", "models", "ghost")


def test_the_core_group_is_the_empty_group() -> None:
    assert error_from(404, json.dumps(NAMESPACE_GONE)).names("", "namespaces", "team-a")


def test_a_status_without_an_object_names_none() -> None:
    assert error_from(404, json.dumps(NOT_SERVED)).about is None
    assert error_from(404, "404 page not found").about is None
