"""Exec-plugin credentials (kubeconfig `users[].user.exec`), refreshed as client-go does.

EKS (`aws eks get-token`), GKE's gke-gcloud-auth-plugin and kubelogin hand out tokens
that live minutes. kubernetes-asyncio runs the plugin once when the kubeconfig is loaded
and again only if its loader is asked, which KubeClient never did: after the first token
expired every request answered 401. This module keeps the plugin's answer and runs the
plugin again, like client-go's exec authenticator:

- when `status.expirationTimestamp` has passed (a little before, so that a token is not
  sent to die in transit);
- once after a 401 to a request that carried the current token (the token may have been
  revoked, or the clocks disagree); the caller then resends the request once.

Concurrent requests share one run (a lock, and a check of what the waiters saw). The
plugin gets KUBERNETES_EXEC_INFO (ExecCredential, non-interactive, with the cluster when
`provideClusterInfo` is set) and the kubeconfig's `env` on top of ours.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
RUN_TIMEOUT = 60.0  # a plugin that hangs must not hold every request forever
EARLY = 10.0  # refresh at most this long before expiry ...
EARLY_FRACTION = 0.1  # ... and at most this part of the token's life (5 s tokens)
_FIELD = "users[].user.exec"


class ExecPluginError(Exception):
    """The plugin could not be run, failed, or answered something that is not a credential."""


@dataclass(frozen=True, slots=True)
class Credential:
    token: str | None  # the bearer token, without "Bearer "
    cert_pem: bytes | None  # client certificate and key, when the plugin hands those out
    key_pem: bytes | None
    refresh_at: float | None  # time.time() after which the plugin is run again; None: never


def _expiry(value: Any, now: float) -> float | None:
    """When to run the plugin again, from an RFC 3339 expirationTimestamp."""
    if value in (None, ""):
        return None
    try:
        when = datetime.datetime.fromisoformat(str(value))
    except ValueError as e:
        raise ExecPluginError(f"status.expirationTimestamp {value!r} is not RFC 3339") from e
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    expires = when.timestamp()
    return expires - min(EARLY, max(0.0, expires - now) * EARLY_FRACTION)


def parse_exec_credential(stdout: bytes, api_version: str, now: float) -> Credential:
    """The plugin's ExecCredential, checked as client-go checks it."""
    try:
        doc = json.loads(stdout)
    except ValueError as e:
        raise ExecPluginError(f"plugin output is not JSON: {e}") from e
    if not isinstance(doc, dict):
        raise ExecPluginError("plugin output is not an ExecCredential object")
    if doc.get("kind") != "ExecCredential":
        raise ExecPluginError(f"plugin output kind {doc.get('kind')!r}, want ExecCredential")
    if doc.get("apiVersion") != api_version:
        raise ExecPluginError(
            f"plugin output apiVersion {doc.get('apiVersion')!r} does not match {api_version}"
        )
    status = doc.get("status")
    if not isinstance(status, dict):
        raise ExecPluginError("plugin output has no status")
    token = status.get("token") or None
    cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
    if bool(cert) != bool(key):
        raise ExecPluginError("status.clientCertificateData and clientKeyData go together")
    if token is None and not cert:
        raise ExecPluginError("status has neither token nor clientCertificateData")
    if token is not None and not isinstance(token, str):
        raise ExecPluginError("status.token is not a string")
    return Credential(
        token=token,
        cert_pem=str(cert).encode() if cert else None,
        key_pem=str(key).encode() if key else None,
        refresh_at=_expiry(status.get("expirationTimestamp"), now),
    )


def _cluster_info(cluster: dict[str, Any]) -> dict[str, Any]:
    """ExecCredential spec.cluster (provideClusterInfo): what the plugin may need to know."""
    info: dict[str, Any] = {"server": cluster.get("server", "")}
    ca = cluster.get("certificate-authority-data")
    if not ca and cluster.get("certificate-authority"):
        ca = base64.b64encode(Path(cluster["certificate-authority"]).read_bytes()).decode()
    for name, value in (
        ("tls-server-name", cluster.get("tls-server-name")),
        ("insecure-skip-tls-verify", cluster.get("insecure-skip-tls-verify")),
        ("certificate-authority-data", ca),
        ("proxy-url", cluster.get("proxy-url")),
        ("disable-compression", cluster.get("disable-compression")),
        ("config", (cluster.get("extensions") or {}).get("client.authentication.k8s.io/exec")),
    ):
        if value:
            info[name] = value
    return info


class ExecPlugin:
    """A kubeconfig exec plugin and the credential it last handed out."""

    def __init__(
        self,
        config: dict[str, Any],
        cluster: dict[str, Any] | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        command = config.get("command")
        if not command or not isinstance(command, str):
            raise ExecPluginError(f"{_FIELD}.command is required")
        self.api_version = str(config.get("apiVersion", ""))
        if self.api_version not in API_VERSIONS:
            raise ExecPluginError(
                f"{_FIELD}.apiVersion {self.api_version!r} is not one of {', '.join(API_VERSIONS)}"
            )
        # Nobody is at a terminal to answer a prompt (client-go refuses the same).
        if config.get("interactiveMode") == "Always":
            raise ExecPluginError(f"{_FIELD}.interactiveMode Always needs a terminal")
        args = config.get("args") or []
        if not isinstance(args, list):
            raise ExecPluginError(f"{_FIELD}.args must be a list")
        self.argv = [command, *(str(a) for a in args)]
        self.env = {str(e["name"]): str(e["value"]) for e in config.get("env") or []}
        info: dict[str, Any] = {
            "apiVersion": self.api_version,
            "kind": "ExecCredential",
            "spec": {"interactive": False},
        }
        if config.get("provideClusterInfo") and cluster is not None:
            info["spec"]["cluster"] = _cluster_info(cluster)
        self.env["KUBERNETES_EXEC_INFO"] = json.dumps(info)
        self.clock = clock
        self.credential: Credential | None = None
        self.runs = 0  # plugin runs so far (tests and logs read it)
        self._lock = asyncio.Lock()

    @classmethod
    def from_kubeconfig(cls, loader: Any) -> ExecPlugin | None:
        """The exec plugin of kubernetes-asyncio's loaded context, if its user has one.

        The loader already ran the plugin once: its token is taken as the first
        credential, so that start-up does not run the plugin twice.
        """
        user = getattr(loader, "_user", None)
        exec_config = user.safe_get("exec") if user is not None else None
        if exec_config is None:
            return None
        cluster = getattr(loader, "_cluster", None)
        plugin = cls(
            _plain(exec_config),
            _plain(cluster) if cluster is not None else None,
        )
        token = str(getattr(loader, "token", "") or "")
        expiry = getattr(loader, "exec_plugin_expiry", None)
        if token.startswith("Bearer ") and isinstance(expiry, datetime.datetime):
            # Without an expiry the loader's token is not trusted to be the plugin's.
            plugin.credential = Credential(
                token[len("Bearer ") :], None, None, _expiry(expiry.isoformat(), plugin.clock())
            )
        return plugin

    def current(self) -> Credential | None:
        """The credential to send now; None when the plugin must be run (again)."""
        credential = self.credential
        if credential is None:
            return None
        if credential.refresh_at is not None and self.clock() >= credential.refresh_at:
            return None
        return credential

    async def get(self) -> Credential:
        credential = self.current()
        if credential is not None:
            return credential
        return await self.refresh(self.credential)

    async def refresh(self, stale: Credential | None) -> Credential:
        """Run the plugin, unless another caller already replaced `stale` meanwhile."""
        async with self._lock:
            credential = self.credential
            if credential is not None and credential is not stale and self.current() is not None:
                return credential  # a concurrent caller's run: share it
            self.credential = await self._run()
            return self.credential

    async def _run(self) -> Credential:
        self.runs += 1
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv,
                env=os.environ | self.env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as e:
            raise ExecPluginError(f"cannot run exec plugin {self.argv[0]!r}: {e}") from e
        try:
            async with asyncio.timeout(RUN_TIMEOUT):
                stdout, stderr = await proc.communicate()
        except TimeoutError as e:
            proc.kill()
            await proc.wait()
            raise ExecPluginError(
                f"exec plugin {self.argv[0]!r} gave no answer in {RUN_TIMEOUT:.0f} s"
            ) from e
        if proc.returncode != 0:
            detail = stderr.decode(errors="replace").strip()[-500:]
            raise ExecPluginError(
                f"exec plugin {self.argv[0]!r} exited with {proc.returncode}: {detail}"
            )
        try:
            return parse_exec_credential(stdout, self.api_version, self.clock())
        except ExecPluginError as e:
            raise ExecPluginError(f"exec plugin {self.argv[0]!r}: {e}") from e


def _plain(node: Any) -> Any:
    """kubernetes-asyncio's ConfigNode (or a plain value) as plain dicts and lists."""
    value = getattr(node, "value", node)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
