"""Serving pods hardened by default, over HTTP on the test server: LLMKube's security
contexts (the user's keys still win), no service-account token, the model-cache prep's
place and shape (tests/unit/test_cache_prep.py runs it for real), hostPath volumes in
extraVolumes only under the operator's host-path roots, and opaque fields nested
without bound refused.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_pod_hardening.py.
"""

from __future__ import annotations

from reconcilers.pod_security import container_security_context
from reconcilers.writes.apply import contains
from tests.support.pod_hardening import host_volume, nested
from tests.support.webhook import admission_request
from webhook.admission import verdict


def test_comparing_objects_of_any_depth_needs_no_recursion() -> None:
    deep = nested(5000)
    assert contains(deep, nested(5000))
    assert not contains(deep, nested(5000, leaf=2))
    assert not contains(deep, nested(4999))
    wrapped = {"spec": {"volumes": [{"name": "v", "x": deep}]}}
    live = {"spec": {"volumes": [{"name": "other"}, {"name": "v", "x": nested(5000)}]}}
    assert contains(wrapped, live), "keyed list items found by name at any depth"


def test_the_webhook_refuses_a_deeply_nested_opaque_field() -> None:
    deep = {"modelRef": "m", "extraVolumes": [{"name": "ok", "emptyDir": {}}, nested(40)]}
    allowed, message = verdict(admission_request("InferenceService", deep))
    assert not allowed and message.startswith("spec.extraVolumes[1]: nested more than 32")
    fine = {"modelRef": "m", "affinity": nested(32)}
    assert verdict(admission_request("InferenceService", fine)) == (True, "")


def test_the_webhook_refuses_host_path_volumes_outside_the_roots() -> None:
    def check(path: str, roots: tuple[str, ...] = (), any_path: bool = False) -> tuple[bool, str]:
        spec = {"modelRef": "m", "extraVolumes": [host_volume(path)]}
        return verdict(admission_request("InferenceService", spec), None, roots, any_path)

    allowed, message = check("/var/lib/kubelet")
    assert not allowed and message.startswith("spec.extraVolumes[0].hostPath.path: '/var/lib")
    assert check("/srv/models/a", ("/srv/models",)) == (True, "")
    assert not check("/srv/modelsX", ("/srv/models",))[0]
    assert check("/var/lib/kubelet", any_path=True) == (True, "")


def test_container_defaults_give_way_where_the_api_server_would_refuse_the_pair() -> None:
    # privileged, or SYS_ADMIN added, with allowPrivilegeEscalation false: refused by
    # kube-apiserver's validation, so ours is left out (the user's choice stands).
    assert "allowPrivilegeEscalation" not in container_security_context({"privileged": True})
    sys_admin = container_security_context({"capabilities": {"add": ["SYS_ADMIN"]}})
    assert sys_admin == {"capabilities": {"add": ["SYS_ADMIN"]}}
    kept = container_security_context({"privileged": True, "allowPrivilegeEscalation": True})
    assert kept["allowPrivilegeEscalation"] is True
    # A runtime on a port below 1024 keeps the one capability binding it needs.
    assert container_security_context(None, 80)["capabilities"] == {
        "drop": ["ALL"],
        "add": ["NET_BIND_SERVICE"],
    }
