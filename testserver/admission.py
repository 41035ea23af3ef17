"""Validating admission webhooks, called as kube-apiserver calls them.

Each ValidatingWebhookConfiguration stored in the server is honoured: rules (operations,
apiGroups, apiVersions, resources with subresources, scope), namespaceSelector and
objectSelector, clientConfig.url with caBundle (TLS verified against it), timeoutSeconds
and failurePolicy. Requests and responses are AdmissionReview v1. A `clientConfig.service`
cannot be reached from a test process, so it counts as a failed call (failurePolicy decides).
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import uuid
from dataclasses import dataclass
from typing import Any

import aiohttp

from objtypes import Obj

from .kinds import NAMESPACE, WEBHOOKS, ResourceType
from .storage import Storage, StorageError


@dataclass
class Request:
    """One write under admission."""

    rt: ResourceType
    operation: str  # CREATE, UPDATE, DELETE
    namespace: str
    name: str
    subresource: str
    obj: Obj | None
    old: Obj | None
    dry_run: bool


def _matches_one(values: list[str], value: str) -> bool:
    return "*" in values or value in values


def _rule_matches(rule: Obj, req: Request) -> bool:
    if not _matches_one(rule.get("operations") or [], req.operation):
        return False
    if not _matches_one(rule.get("apiGroups") or [], req.rt.group):
        return False
    if not _matches_one(rule.get("apiVersions") or [], req.rt.version):
        return False
    scope = rule.get("scope", "*")
    if scope == "Namespaced" and not req.rt.namespaced:
        return False
    if scope == "Cluster" and req.rt.namespaced:
        return False
    wanted = f"{req.rt.plural}/{req.subresource}" if req.subresource else req.rt.plural
    for resource in rule.get("resources") or []:
        if resource == "*" and not req.subresource:
            return True
        if resource == "*/*" or resource == wanted:
            return True
        if resource.startswith("*/") and req.subresource == resource[2:]:
            return True
        if resource.endswith("/*") and req.subresource and resource[:-2] == req.rt.plural:
            return True
    return False


def selector_matches(selector: Obj | None, labels: dict[str, str]) -> bool:
    """metav1.LabelSelector: matchLabels and matchExpressions; empty or absent matches all."""
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


class Admission:
    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._contexts: dict[str, ssl.SSLContext] = {}

    def _context(self, ca_bundle: str | None) -> ssl.SSLContext:
        key = ca_bundle or ""
        if key not in self._contexts:
            if ca_bundle:
                pem = base64.b64decode(ca_bundle).decode()
                self._contexts[key] = ssl.create_default_context(cadata=pem)
            else:
                self._contexts[key] = ssl.create_default_context()
        return self._contexts[key]

    def _applies(self, hook: Obj, req: Request) -> bool:
        if not any(_rule_matches(rule, req) for rule in hook.get("rules") or []):
            return False
        target = req.obj if req.obj is not None else req.old or {}
        labels = (target.get("metadata") or {}).get("labels") or {}
        if not selector_matches(hook.get("objectSelector"), labels):
            return False
        if req.rt.namespaced and hook.get("namespaceSelector"):
            ns_labels: dict[str, str] = {}
            try:
                ns = self.storage.view(NAMESPACE, "", req.namespace)
                ns_labels = (ns.get("metadata") or {}).get("labels") or {}
            except StorageError:
                pass
            ns_labels = {**ns_labels, "kubernetes.io/metadata.name": req.namespace}
            return selector_matches(hook.get("namespaceSelector"), ns_labels)
        return True

    async def validate(self, req: Request) -> None:
        """Call every matching webhook; raise the apiserver's error if one denies or fails."""
        configs = self.storage.select_view(WEBHOOKS, None, lambda o: True)
        if not configs:
            return
        hooks = [h for c in configs for h in c.get("webhooks") or [] if self._applies(h, req)]
        if hooks:
            await asyncio.gather(*(self._call(h, req) for h in hooks))

    async def _call(self, hook: Obj, req: Request) -> None:
        name = hook.get("name", "")
        if req.dry_run and hook.get("sideEffects") not in (None, "None", "NoneOnDryRun"):
            raise StorageError(
                400, "BadRequest", f'admission webhook "{name}" does not support dry run'
            )
        try:
            response = await self._post(hook, req)
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError, ssl.SSLError) as e:
            if hook.get("failurePolicy", "Fail") == "Ignore":
                return
            detail = "context deadline exceeded" if isinstance(e, TimeoutError) else str(e)
            raise StorageError(
                500,
                "InternalError",
                f'Internal error occurred: failed calling webhook "{name}": {detail}',
            ) from e
        if response.get("allowed") is True:
            return
        result = response.get("status") or {}
        code = int(result.get("code") or 400)
        message = result.get("message") or ""
        raise StorageError(
            code,
            result.get("reason") or ("Forbidden" if code == 403 else "BadRequest"),
            f'admission webhook "{name}" denied the request: {message}'.rstrip(": "),
        )

    async def _post(self, hook: Obj, req: Request) -> Obj:
        client = hook.get("clientConfig") or {}
        url = client.get("url")
        if not url:
            service = client.get("service") or {}
            raise ValueError(
                f"service {service.get('namespace')}/{service.get('name')} is not reachable "
                "from the test API server; use clientConfig.url"
            )
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": self._request_body(req),
        }
        timeout = aiohttp.ClientTimeout(total=float(hook.get("timeoutSeconds") or 10))
        ctx = self._context(client.get("caBundle"))
        async with (
            aiohttp.ClientSession(timeout=timeout, trust_env=False) as session,
            session.post(url, json=review, ssl=ctx) as resp,
        ):
            if resp.status != 200:
                raise ValueError(f"the server responded with HTTP {resp.status}")
            body: Any = await resp.json(content_type=None)
        if not isinstance(body, dict) or not isinstance(body.get("response"), dict):
            raise ValueError("the webhook answered without an AdmissionReview response")
        response: Obj = body["response"]
        return response

    @staticmethod
    def _request_body(req: Request) -> Obj:
        rt = req.rt
        gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
        gvr = {"group": rt.group, "version": rt.version, "resource": rt.plural}
        body: Obj = {
            "uid": str(uuid.uuid4()),
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": req.name,
            "operation": req.operation,
            "userInfo": {"username": "system:admin", "groups": ["system:masters"]},
            "object": req.obj,
            "oldObject": req.old,
            "dryRun": req.dry_run,
        }
        if req.subresource:
            body["subResource"] = req.subresource
        if rt.namespaced:
            body["namespace"] = req.namespace
        return body
