"""A dynamic Kubernetes client: JSON objects over kubernetes-asyncio's authenticated transport.

kubernetes-asyncio loads in-cluster or kubeconfig credentials and owns the HTTP
session; this module speaks plain REST paths so every resource, custom or built-in,
goes through the same few verbs, and watches are read as raw line-delimited streams.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from .resources import ResourceType

Obj = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
DEFAULT_TIMEOUT = 30.0


class ApiError(Exception):
    """A non-2xx answer from the apiserver, with its Status reason and message."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def gone(self) -> bool:
        return self.status == 410


def _error_from(status: int, text: str) -> ApiError:
    try:
        body = json.loads(text)
        return ApiError(status, str(body.get("reason", "")), str(body.get("message", text)))
    except ValueError:
        return ApiError(status, "", text[:500])


class KubeClient:
    def __init__(self, api_client: k8s_client.ApiClient, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.api = api_client
        self.timeout = timeout

    @classmethod
    async def connect(
        cls,
        server: str | None = None,
        kubeconfig: str | None = None,
        *,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> KubeClient:
        """An explicit server URL (tests, the demo), else in-cluster config, else kubeconfig."""
        configuration = k8s_client.Configuration()
        if server:
            configuration.host = server.rstrip("/")
            if token:
                configuration.api_key = {"BearerToken": f"Bearer {token}"}
        else:
            try:
                k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            except k8s_config.ConfigException:
                await k8s_config.load_kube_config(
                    config_file=kubeconfig, client_configuration=configuration
                )
        return cls(k8s_client.ApiClient(configuration), timeout=timeout)

    async def close(self) -> None:
        await self.api.close()

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | aiohttp.ClientTimeout | None = None,
    ) -> aiohttp.ClientResponse:
        response: aiohttp.ClientResponse = await self.api.call_api(
            path,
            method,
            query_params=list((query or {}).items()),
            header_params={"Content-Type": content_type, "Accept": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout if timeout is not None else self.timeout,
        )
        return response

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Obj:
        response = await self._send(method, path, query=query, body=body, content_type=content_type)
        async with response:
            text = await response.text()
            if response.status >= 400:
                raise _error_from(response.status, text)
            result: Obj = json.loads(text) if text else {}
            return result

    # -- verbs -----------------------------------------------------------------

    async def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj | None:
        try:
            return await self.request("GET", rt.object_path(namespace, name))
        except ApiError as e:
            if e.not_found:
                return None
            raise

    async def list(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        page_size: int = 500,
    ) -> tuple[list[Obj], str]:
        """All items, page by page, and the list's resourceVersion to watch from."""
        items: list[Obj] = []
        query: dict[str, str] = {"limit": str(page_size)}
        if label_selector:
            query["labelSelector"] = label_selector
        while True:
            page = await self.request("GET", rt.collection_path(namespace), query=query)
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                return items, str(meta.get("resourceVersion", ""))
            query["continue"] = token

    async def create(self, rt: ResourceType, obj: Obj) -> Obj:
        namespace = (obj.get("metadata") or {}).get("namespace")
        return await self.request("POST", rt.collection_path(namespace), body=obj)

    async def replace(self, rt: ResourceType, obj: Obj, subresource: str = "") -> Obj:
        """PUT with the object's resourceVersion: a concurrent write answers 409."""
        meta = obj["metadata"]
        path = rt.object_path(meta.get("namespace"), meta["name"], subresource)
        return await self.request("PUT", path, body=obj)

    async def patch(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        patch: Obj,
        *,
        subresource: str = "",
        content_type: str = MERGE_PATCH,
    ) -> Obj:
        path = rt.object_path(namespace, name, subresource)
        return await self.request("PATCH", path, body=patch, content_type=content_type)

    async def delete(self, rt: ResourceType, namespace: str | None, name: str) -> None:
        try:
            await self.request("DELETE", rt.object_path(namespace, name))
        except ApiError as e:
            if not e.not_found:
                raise

    async def watch(
        self,
        rt: ResourceType,
        resource_version: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[Obj]:
        """Raw watch events ({"type", "object"}) from resource_version, bookmarks included.

        The stream ends when the server closes it; a dead connection is noticed by the
        read timeout, which is longer than the server-side timeout asked for.
        """
        query = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        if label_selector:
            query["labelSelector"] = label_selector
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self.timeout, sock_read=timeout_seconds + self.timeout
        )
        response = await self._send(
            "GET", rt.collection_path(namespace), query=query, timeout=timeout
        )
        async with response:
            if response.status >= 400:
                raise _error_from(response.status, await response.text())
            buffer = b""
            # Objects can be larger than aiohttp's line limit: split the stream ourselves.
            async for chunk in response.content.iter_any():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield json.loads(line)
            if buffer.strip():
                yield json.loads(buffer)
