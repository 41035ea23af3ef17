"""How KubeClient reaches the API server: connections, credentials, retries.

kubernetes-asyncio loads in-cluster or kubeconfig credentials (token files that rotate,
client certificates); we ask its Configuration for the Authorization header on every
request, so that rotated token files are read again. A kubeconfig exec plugin is ours
to run (controller.credentials): its token is refreshed at expiry and after a 401. We
send the requests ourselves: kubernetes-asyncio's session trusts the environment, which
costs two thread hops per request (proxy lookup and ~/.netrc); the proxy is decided
once (controller.proxy, client-go's rules). Short requests go over keep-alive
connections of our own (controller.http1), directly or through an http:// proxy;
watches, and everything through an https:// proxy, over an aiohttp session.

A 429, or a 5xx carrying Retry-After, closes that request path of this client until the
time the server asked for; the request is retried a few times (as client-go does), and
other paths are not held up.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import ssl
import tempfile
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Self, TypeVar

import aiohttp
import yarl
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from metrics.rest_client import RestClientMetrics
from objtypes import Obj

from . import jsondepth
from .clock import REAL, Clock
from .credentials import Credential, ExecPlugin
from .errors import Fenced, error_from, parse_retry_after
from .http1 import ConnectionPool, Reply, Tunnel
from .proxy import for_server as proxy_for_server

DEFAULT_TIMEOUT = 30.0
DEFAULT_POOL = 32
RETRIES = 3  # requests retried after a Retry-After wait, as client-go's maxRetries
# A path made of these characters needs no percent-encoding: it is handed to yarl as
# already encoded, which spares a parse-and-quote of every request's URL.
_PLAIN_PATH = re.compile(r"[A-Za-z0-9._~:@!$&'()*+,;=/-]*")
# Characters a path may carry as they are; "%" too, so that an escape is not escaped
# again (yarl's behaviour before).
_PATH_SAFE = "/:@!$&'()*+,;=-._~%"
_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})  # sent with a Content-Length even if empty
_R = TypeVar("_R")


_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"))  # json.dumps builds one per call


def dumps(value: Any) -> bytes:
    """A request body: compact JSON (the apiserver does not care for spaces)."""
    return _COMPACT_JSON.encode(value).encode()


class Throttle:
    """Per-path "not before" times a server asked for with Retry-After."""

    def __init__(self, clock: Clock = REAL) -> None:
        self.clock = clock
        self._until: dict[str, float] = {}
        self.waits = 0  # requests that had to wait (tests and metrics read it)

    def hold(self, path: str, seconds: float) -> None:
        until = self.clock.monotonic() + seconds
        if until > self._until.get(path, 0.0):
            self._until[path] = until

    async def wait(self, path: str) -> None:
        until = self._until.get(path)
        if until is None:
            return
        remaining = until - self.clock.monotonic()
        if remaining <= 0:
            del self._until[path]
            return
        self.waits += 1
        await self.clock.sleep(remaining)


def _ssl_context(configuration: k8s_client.Configuration) -> ssl.SSLContext:
    """The TLS settings kubernetes-asyncio would use, from the same Configuration."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if getattr(configuration, "disable_strict_ssl_verification", False):
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context


def _write_pair(directory: str, cert_pem: bytes, key_pem: bytes) -> tuple[str, str]:
    cert, key = Path(directory, "client.crt"), Path(directory, "client.key")
    cert.write_bytes(cert_pem)
    key.write_bytes(key_pem)
    return str(cert), str(key)


def raise_for_status(reply: Reply) -> None:
    """An error answer as its typed ApiError, with the server's Retry-After."""
    if reply.status >= 400:
        raise error_from(
            reply.status,
            reply.body.decode(errors="replace"),
            parse_retry_after(reply.headers.get("retry-after")),
        )


def _target(prefix: str, path: str, query: dict[str, str] | None) -> str:
    """The request target: the server URL's own path, ours, and the query, encoded."""
    if not _PLAIN_PATH.fullmatch(path):
        path = urllib.parse.quote(path, safe=_PATH_SAFE)
    if query:
        return f"{prefix}{path}?{urllib.parse.urlencode(query, quote_via=urllib.parse.quote)}"
    return prefix + path


class Transport:
    """One API server's connections, credentials and retry rules; KubeClient adds the
    verbs."""

    def __init__(
        self,
        configuration: k8s_client.Configuration,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        pool_size: int = DEFAULT_POOL,
        proxy_env: bool = True,
        user_agent: str = "llmkube-controller",
    ) -> None:
        self.configuration = configuration
        self.user_agent = user_agent
        # Leader election sets this: a write (any verb but GET) to a path it refuses
        # raises Fenced without being sent.
        self.fence: Callable[[str], bool] | None = None
        self.host = str(configuration.host).rstrip("/")
        self._url = urllib.parse.urlsplit(self.host)
        # A server URL may carry a path (a proxy's route to the cluster).
        self._prefix = urllib.parse.quote(self._url.path.rstrip("/"), safe=_PATH_SAFE)
        self._plain_host = re.fullmatch(r"[A-Za-z0-9.:/\[\]-]*", self.host) is not None
        self.timeout = timeout
        self._default_timeout = aiohttp.ClientTimeout(total=timeout)
        # Headers by content type, built once; each request adds its auth.
        self._base_headers: dict[str, dict[str, str]] = {}
        self._head_lines: dict[str, str] = {}
        self.throttle = Throttle()
        self.pool_size = pool_size
        # The proxy is decided here, once (client-go's rules, controller.proxy): never
        # per request in a thread, as aiohttp's trust_env did. proxy_env=False: the
        # environment is not consulted (the kubeconfig's proxy-url still is).
        self.proxy = proxy_for_server(
            self.host, getattr(configuration, "proxy", None), os.environ if proxy_env else None
        )
        self._session: aiohttp.ClientSession | None = None
        # Short requests go over our own keep-alive connections (controller.http1),
        # directly or through an http:// proxy (CONNECT for https, absolute-form for
        # http, as Go does); an https:// proxy is aiohttp's to speak to.
        self.lean = self._url.scheme in ("http", "https") and (
            self.proxy is None or self.proxy.scheme == "http"
        )
        self._absolute = self.proxy is not None and self._url.scheme == "http"
        if self._absolute:  # requests name the server: the proxy is the peer
            self._prefix = f"http://{self._url.netloc.rpartition('@')[2]}{self._prefix}"
        self._pool: ConnectionPool | None = None
        self._proxy_headers = (
            {"Proxy-Authorization": self.proxy.authorization}
            if self.proxy is not None and self.proxy.authorization
            else None
        )
        # A kubeconfig exec plugin (connect() finds it): its token replaces the
        # Configuration's, is refreshed at expiry, and once more after a 401.
        self.exec_plugin: ExecPlugin | None = None
        self._client_cert: bytes | None = None  # the plugin's certificate in use
        self._cert_dir: str | None = None  # where it is written for the TLS contexts
        # rest_client_* metrics; a Manager binds them to its registry (record_metrics_in).
        self.rest_metrics = RestClientMetrics(None).recorder(self.api_host)

    @property
    def api_host(self) -> str:
        """The API server's host[:port] as its URL writes it: the `host` label."""
        return self._url.netloc.rpartition("@")[2]

    def record_metrics_in(self, metrics: RestClientMetrics) -> None:
        self.rest_metrics = metrics.recorder(self.api_host)

    def _ssl(self) -> ssl.SSLContext | None:
        return _ssl_context(self.configuration) if self._url.scheme == "https" else None

    @property
    def session(self) -> aiohttp.ClientSession:
        """aiohttp, for watches, and for every request through an https:// proxy."""
        # Made lazily, inside the running loop that will use it.
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self.pool_size, ssl=self._ssl() or False, keepalive_timeout=30
            )
            # trust_env=False: no proxy lookup and ~/.netrc read in a thread per request.
            self._session = aiohttp.ClientSession(
                connector=connector, trust_env=False, json_serialize=json.dumps
            )
        return self._session

    @property
    def pool(self) -> ConnectionPool:
        if self._pool is None:
            default_port = 443 if self._url.scheme == "https" else 80
            host, port = self._url.hostname or "localhost", self._url.port or default_port
            tunnel = None
            if self.proxy is not None and self._absolute:
                host, port = self.proxy.host, self.proxy.port
            elif self.proxy is not None:
                tunnel = Tunnel(self.proxy.host, self.proxy.port, self.proxy.authorization)
            self._pool = ConnectionPool(
                host,
                port,
                ssl_context=self._ssl(),
                server_hostname=getattr(self.configuration, "tls_server_name", None)
                or self._url.hostname,
                limit=self.pool_size,
                tunnel=tunnel,
            )
        return self._pool

    @classmethod
    async def connect(
        cls,
        server: str | None = None,
        kubeconfig: str | None = None,
        *,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        pool_size: int = DEFAULT_POOL,
        proxy_env: bool = True,
        user_agent: str = "llmkube-controller",
    ) -> Self:
        """An explicit server URL (tests, the demo), else in-cluster config, else kubeconfig."""
        configuration = k8s_client.Configuration()
        exec_plugin = None
        if server:
            configuration.host = server.rstrip("/")
            if token:
                configuration.api_key = {"BearerToken": f"Bearer {token}"}
        else:
            try:
                k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            except k8s_config.ConfigException:
                loader = await k8s_config.load_kube_config(
                    config_file=kubeconfig, client_configuration=configuration
                )
                exec_plugin = ExecPlugin.from_kubeconfig(loader)
        client = cls(
            configuration,
            timeout=timeout,
            pool_size=pool_size,
            proxy_env=proxy_env,
            user_agent=user_agent,
        )
        client.exec_plugin = exec_plugin
        return client

    async def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._session is not None:
            await self._session.close()
        if self._cert_dir is not None:
            shutil.rmtree(self._cert_dir, ignore_errors=True)
            self._cert_dir = None

    async def _use_client_cert(self, credential: Credential) -> None:
        """A client certificate from the exec plugin, first or renewed: new connections
        present it. Kept connections and the aiohttp session (its watches end, and
        restart) are let go, as client-go closes its connections when it rotates one."""
        assert credential.cert_pem is not None and credential.key_pem is not None
        self._client_cert = credential.cert_pem  # before any await: one swap per change
        if self._cert_dir is None:
            self._cert_dir = tempfile.mkdtemp(prefix="llmkube-exec-")  # mode 0700
        # ssl loads a certificate from files only; a few KB, written once per rotation.
        cert, key = _write_pair(self._cert_dir, credential.cert_pem, credential.key_pem)
        self.configuration.cert_file, self.configuration.key_file = cert, key
        if self._pool is not None:
            self._pool.close()  # requests in flight finish; their connections are retired
            self._pool = None
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def _auth(self) -> dict[str, str]:
        """The Authorization header (or other API-key headers), asked for every request."""
        if self.exec_plugin is not None:
            credential = await self.exec_plugin.get()
            if credential.cert_pem is not None and credential.cert_pem != self._client_cert:
                await self._use_client_cert(credential)
            return {"authorization": f"Bearer {credential.token}"} if credential.token else {}
        # auth_settings() runs the Configuration's refresh hook: in-cluster token files
        # are read again as the kubelet rotates them.
        auth = await self.configuration.auth_settings()
        headers: dict[str, str] = {}
        for setting in auth.values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[str(setting["key"])] = str(setting["value"])
        return headers

    async def _headers(self, content_type: str) -> dict[str, str]:
        base = self._base_headers.get(content_type)
        if base is None:
            base = self._base_headers[content_type] = {
                "Content-Type": content_type,
                "Accept": "application/json",
                "User-Agent": self.user_agent,
            }
        return base | await self._auth()

    async def _head(self, method: str, target: str, content_type: str, length: int | None) -> bytes:
        """The request line and headers for the lean transport."""
        lines = self._head_lines.get(content_type)
        if lines is None:
            lines = self._head_lines[content_type] = (
                f"Host: {self._url.netloc.rpartition('@')[2]}\r\n"
                f"User-Agent: {self.user_agent}\r\n"
                f"Accept: application/json\r\nContent-Type: {content_type}\r\n"
            )
            if self._absolute and self.proxy is not None and self.proxy.authorization:
                lines += f"Proxy-Authorization: {self.proxy.authorization}\r\n"
                self._head_lines[content_type] = lines
        parts = [f"{method} {target} HTTP/1.1\r\n", lines]
        for name, value in (await self._auth()).items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                raise ValueError(f"header {name} has a line break: refusing to send it")
            parts.append(f"{name}: {value}\r\n")
        if length is not None:
            parts.append(f"Content-Length: {length}\r\n")
        parts.append("\r\n")
        return "".join(parts).encode("latin-1")

    def _timeout(self, timeout: float | aiohttp.ClientTimeout | None) -> aiohttp.ClientTimeout:
        if timeout is None:
            if self._default_timeout.total != self.timeout:  # the attribute was changed
                self._default_timeout = aiohttp.ClientTimeout(total=self.timeout)
            return self._default_timeout
        if isinstance(timeout, aiohttp.ClientTimeout):
            return timeout
        return aiohttp.ClientTimeout(total=timeout)

    def _check_fence(self, method: str, path: str) -> None:
        if method != "GET" and self.fence is not None and not self.fence(path):
            raise Fenced(path)

    async def _retrying(
        self,
        method: str,
        path: str,
        send: Callable[[], Awaitable[_R]],
        answer: Callable[[_R], tuple[int, str | None]],
        discard: Callable[[_R], None],
    ) -> _R:
        """send() after any Retry-After wait on its path; sent again when told to wait.

        A 401 with an exec plugin's credential runs the plugin again (unless a
        concurrent request already did) and sends once more, as client-go does.
        """
        attempt = 0
        reauthenticated = False
        while True:
            await self.throttle.wait(path)
            # What send() will carry (got now: an expired one is replaced first, and
            # before the fence is asked, as a plugin run may take seconds).
            sent_with = None if self.exec_plugin is None else await self.exec_plugin.get()
            self._check_fence(method, path)
            response = await self.rest_metrics.attempt(
                method, send, lambda r: answer(r)[0], unsent=Fenced
            )
            status, header = answer(response)
            if status == 401 and self.exec_plugin is not None and not reauthenticated:
                reauthenticated = True
                discard(response)
                await self.exec_plugin.refresh(sent_with)
                continue
            retry_after = parse_retry_after(header)
            if retry_after is not None and (status == 429 or status >= 500):
                self.throttle.hold(path, retry_after)
                if attempt < RETRIES:
                    attempt += 1
                    discard(response)
                    continue
            return response

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Reply:
        """One short request, its answer read whole."""
        data = None if body is None else dumps(body)

        async def lean() -> Reply:
            target = _target(self._prefix, path, query)
            length = len(data) if data is not None else (0 if method in _WITH_BODY else None)
            head = await self._head(method, target, content_type, length)
            # Checked again right before each send: a wait for a free connection must
            # not carry a write past the moment leadership ended.
            return await self.pool.request(
                method, head, data, self.timeout, lambda: self._check_fence(method, path)
            )

        async def via_aiohttp() -> Reply:
            async with await self._aiohttp(method, path, query, data, content_type) as r:
                return Reply(r.status, {k.lower(): v for k, v in r.headers.items()}, await r.read())

        return await self.rest_metrics.timed(
            method,
            self._retrying(
                method,
                path,
                lean if self.lean else via_aiohttp,
                lambda r: (r.status, r.headers.get("retry-after")),
                lambda r: None,
            ),
        )

    async def _aiohttp(
        self,
        method: str,
        path: str,
        query: dict[str, str] | None,
        data: bytes | None,
        content_type: str,
        timeout: float | aiohttp.ClientTimeout | None = None,
    ) -> aiohttp.ClientResponse:
        url = self.host + path
        target: str | yarl.URL = (
            yarl.URL(url, encoded=True) if self._plain_host and _PLAIN_PATH.fullmatch(path) else url
        )
        headers = await self._headers(content_type)  # first: it may replace the session
        return await self.session.request(
            method,
            target,
            params=query,
            data=data,
            headers=headers,
            timeout=self._timeout(timeout),
            proxy=self.proxy.url if self.proxy is not None else None,
            proxy_headers=self._proxy_headers,
            server_hostname=getattr(self.configuration, "tls_server_name", None),
        )

    async def _stream(
        self, path: str, query: dict[str, str], timeout: aiohttp.ClientTimeout
    ) -> aiohttp.ClientResponse:
        """A GET whose answer is read as it arrives (a watch), on aiohttp."""
        return await self._retrying(
            "GET",
            path,
            lambda: self._aiohttp("GET", path, query, None, "application/json", timeout),
            lambda r: (r.status, r.headers.get("Retry-After")),
            lambda r: r.release(),
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Obj:
        reply = await self._send(method, path, query=query, body=body, content_type=content_type)
        raise_for_status(reply)
        result: Obj = jsondepth.loads(reply.body) if reply.body else {}
        return result


async def split_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Newline-delimited lines from a byte stream, in time linear in its size.

    A partial line is kept as a list of pieces and joined once when its newline
    arrives; re-splitting an ever-growing buffer would be quadratic in object size.
    """
    pending: list[bytes] = []
    async for chunk in chunks:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                if start < len(chunk):
                    pending.append(chunk[start:])
                break
            piece = chunk[start:end]
            if pending:
                pending.append(piece)
                piece = b"".join(pending)
                pending = []
            yield piece
            start = end + 1
    if pending:
        yield b"".join(pending)
