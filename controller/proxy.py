"""Which proxy, if any, reaches the apiserver: client-go's rules, decided once per client.

client-go takes the kubeconfig cluster's `proxy-url` when set, else Go's
http.ProxyFromEnvironment: HTTPS_PROXY (or https_proxy) for https servers, HTTP_PROXY
(http_proxy) for http ones, unless NO_PROXY (no_proxy) excludes the host. As Go does:

- `localhost` and loopback addresses are never proxied;
- NO_PROXY is a comma list: `*` (nothing is proxied), an IP address or CIDR (matches a
  server given as an address, never a resolved name), `example.com` (that name and its
  subdomains), `.example.com` or `*.example.com` (subdomains only); any entry may end in
  `:port` to match that port only;
- a proxy without a scheme is http://; user:password in it is sent as Proxy-Authorization.

aiohttp's trust_env did this lookup (and a ~/.netrc read) in a thread on every request.
A client talks to one server, so the answer is computed once, when the client is made.
"""

from __future__ import annotations

import base64
import ipaddress
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

SCHEMES = ("http", "https")  # client-go also speaks socks5, which we do not


class ProxyError(ValueError):
    """A proxy setting we cannot use; the message names the setting."""


@dataclass(frozen=True, slots=True)
class Proxy:
    url: str  # scheme://host:port, without credentials
    scheme: str
    host: str
    port: int
    authorization: str | None  # the Proxy-Authorization value, from user:password
    source: str  # the setting it came from, for errors and logs

    def __str__(self) -> str:
        return f"{self.url} (from {self.source})"


def parse(value: str, source: str) -> Proxy:
    """A proxy URL as Go reads it: no scheme means http://."""
    if "://" not in value:
        value = "http://" + value
    url = urllib.parse.urlsplit(value)
    if url.scheme not in SCHEMES:
        raise ProxyError(f"{source}: proxy scheme {url.scheme!r} is not supported (http, https)")
    try:
        port = url.port
    except ValueError as e:
        raise ProxyError(f"{source}: {e}") from e
    if not url.hostname:
        raise ProxyError(f"{source}: {value!r} names no host")
    authorization = None
    if url.username is not None:
        user = urllib.parse.unquote(url.username)
        password = urllib.parse.unquote(url.password or "")
        authorization = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    port = port or (443 if url.scheme == "https" else 80)
    host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
    return Proxy(
        f"{url.scheme}://{host}:{port}", url.scheme, url.hostname, port, authorization, source
    )


def _env(environ: Mapping[str, str], name: str) -> tuple[str, str]:
    """(value, variable) of NAME or name, upper case first, as Go's getEnvAny."""
    for variable in (name.upper(), name.lower()):
        value = environ.get(variable)
        if value:
            return value, variable
    return "", name.upper()


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def excluded(host: str, port: int, no_proxy: str) -> bool:
    """Whether NO_PROXY (or the loopback rule) sends host:port directly."""
    host = host.lower().rstrip(".")
    if not host or _loopback(host):
        return True
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for raw in no_proxy.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        if "/" in entry:  # a CIDR block
            try:
                if address is not None and address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                pass
            continue
        name, entry_port = _split_port(entry)
        if entry_port is not None and entry_port != port:
            continue
        try:
            entry_address = ipaddress.ip_address(name.strip("[]"))
        except ValueError:
            entry_address = None
        if entry_address is not None:  # an address matches an address, never a name
            if address == entry_address:
                return True
            continue
        if name.startswith("*."):
            name = name[1:]
        if name.startswith("."):  # subdomains only
            if host.endswith(name):
                return True
        elif host == name or host.endswith("." + name):
            return True
    return False


def _split_port(entry: str) -> tuple[str, int | None]:
    """ "name:80" -> ("name", 80); a bare IPv6 address keeps its colons."""
    if entry.startswith("["):
        name, _, rest = entry[1:].partition("]")
        return name, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    name, sep, port = entry.rpartition(":")
    if sep and port.isdigit() and ":" not in name:
        return name, int(port)
    return entry, None


def for_server(
    server: str, proxy_url: str | None, environ: Mapping[str, str] | None
) -> Proxy | None:
    """The proxy for this server URL: the kubeconfig's proxy-url, else the environment's
    (environ None: the environment is not consulted)."""
    if proxy_url:
        return parse(proxy_url, "kubeconfig proxy-url")
    if environ is None:
        return None
    url = urllib.parse.urlsplit(server)
    if url.scheme not in SCHEMES:
        return None
    value, variable = _env(environ, f"{url.scheme}_proxy")
    if not value:
        return None
    port = url.port or (443 if url.scheme == "https" else 80)
    if excluded(url.hostname or "", port, _env(environ, "no_proxy")[0]):
        return None
    return parse(value, variable)
