"""Proxies from the environment, as client-go's http.ProxyFromEnvironment.

The proxy here is a tiny one on 127.0.0.1 that counts what it carries: CONNECT tunnels
(https servers) and forwarded connections (http servers, absolute-form requests). It
maps every name to 127.0.0.1, so a server URL like https://kube.test:PORT is reachable
only through it: a client that ignored HTTPS_PROXY could not even resolve the name.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_proxy.py.
"""

from __future__ import annotations

import pytest

from controller.proxy import ProxyError, excluded, for_server


@pytest.mark.parametrize(
    ("host", "port", "no_proxy", "direct"),
    [
        ("kube.example.com", 443, "example.com", True),
        ("example.com", 443, "example.com", True),
        ("notexample.com", 443, "example.com", False),
        ("example.com", 443, ".example.com", False),  # a leading dot: subdomains only
        ("a.example.com", 443, ".example.com", True),
        ("a.example.com", 443, "*.example.com", True),
        ("KUBE.Example.COM.", 443, "example.com", True),
        ("kube.test", 443, "*", True),
        ("kube.test", 443, "kube.test:6443", False),  # a port: that port only
        ("kube.test", 6443, "kube.test:6443", True),
        ("10.1.2.3", 443, "10.0.0.0/8", True),
        ("11.1.2.3", 443, "10.0.0.0/8", False),
        ("10.1.2.3", 443, "10.1.2.3", True),
        ("2001:db8::1", 443, "2001:db8::/32", True),
        ("2001:db8::1", 443, "[2001:db8::1]:443", True),
        ("localhost", 443, "", True),  # never proxied, as in Go
        ("127.0.0.2", 443, "", True),
        ("::1", 443, "", True),
        ("kube.test", 443, " , ,", False),
    ],
)
def test_no_proxy_matching(host: str, port: int, no_proxy: str, direct: bool) -> None:
    assert excluded(host, port, no_proxy) is direct


def test_which_variable_serves_which_server() -> None:
    env = {"HTTPS_PROXY": "http://secure:3128", "http_proxy": "plain:8080", "NO_PROXY": "skip.me"}
    assert str(for_server("https://k:6443", None, env)) == "http://secure:3128 (from HTTPS_PROXY)"
    assert str(for_server("http://k", None, env)) == "http://plain:8080 (from http_proxy)"
    assert for_server("https://skip.me", None, env) is None
    assert for_server("https://k", None, None) is None  # the environment not consulted
    kubeconfig = for_server("https://skip.me", "https://kc:443", env)  # proxy-url wins
    assert kubeconfig is not None and kubeconfig.source == "kubeconfig proxy-url"
    with pytest.raises(ProxyError, match="HTTPS_PROXY: proxy scheme 'socks5'"):
        for_server("https://k", None, {"HTTPS_PROXY": "socks5://s:1080"})
