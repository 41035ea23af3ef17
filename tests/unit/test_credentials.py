"""Exec-plugin credentials against a test API server that enforces expiring tokens.

The server runs with --require-token; tests/support/exec_plugin.py is the kubeconfig's plugin
and mints tokens from it, logging each run. Without the refresh (the state of issue 22)
the first token was used forever: every request after its expiry answered 401.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_credentials.py.
"""

from __future__ import annotations

import pytest

from controller.credentials import ExecPluginError, parse_exec_credential

V1 = "client.authentication.k8s.io/v1"


@pytest.mark.parametrize(
    ("output", "error"),
    [
        (b"not json", "not JSON"),
        (
            b'{"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",'
            b' "status": {"token": "t"}}',
            "does not match",
        ),
        (
            b'{"apiVersion": "%s", "kind": "ExecCredential", "status": {}}' % V1.encode(),
            "neither token nor clientCertificateData",
        ),
        (
            b'{"apiVersion": "%s", "kind": "ExecCredential", "status": {"token": "t",'
            b' "expirationTimestamp": "tomorrow"}}' % V1.encode(),
            "expirationTimestamp",
        ),
    ],
)
def test_bad_plugin_output_is_refused_with_a_reason(output: bytes, error: str) -> None:
    with pytest.raises(ExecPluginError, match=error):
        parse_exec_credential(output, V1, 0.0)


def test_an_expiry_is_refreshed_a_little_early() -> None:
    out = (
        b'{"apiVersion": "%s", "kind": "ExecCredential", "status": {"token": "t",'
        b' "expirationTimestamp": "1970-01-01T00:01:40Z"}}' % V1.encode()
    )
    assert parse_exec_credential(out, V1, 95.0).refresh_at == 99.5  # a tenth of 5 s early
    assert parse_exec_credential(out, V1, 0.0).refresh_at == 90.0  # at most 10 s early
