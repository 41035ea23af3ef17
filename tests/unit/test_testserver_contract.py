"""The test server's REST contract: selectors, patches, conflicts, generation, paging, GC.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_testserver_contract.py.
"""

from __future__ import annotations

from controller.resources import BUILTIN_TYPES
from testserver.kinds import BUILTINS

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


def test_the_server_serves_every_built_in_kind_the_controller_uses() -> None:
    """The server's own kinds table agrees with the controller's on each kind it uses."""
    served = {(b.rt.group, b.rt.version, b.rt.plural): b.rt for b in BUILTINS}
    for rt in BUILTIN_TYPES:
        ours = served.get((rt.group, rt.version, rt.plural))
        assert ours is not None, f"{rt.plural}.{rt.group} is not served"
        assert (ours.kind, ours.namespaced, ours.api_version) == (
            rt.kind,
            rt.namespaced,
            rt.api_version,
        ), rt
