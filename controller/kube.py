"""A dynamic Kubernetes client: the verbs over plain REST paths, on the Transport.

Every resource goes through the same few verbs (get, list, create, replace, patch,
delete, watch), and watches are read as raw line-delimited streams. Errors are the
taxonomy of controller.errors; connections, credentials and retries are
controller.transport's.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

import aiohttp

from objtypes import Obj

from . import jsondepth
from .errors import NotFound, error_from, parse_retry_after
from .resources import ResourceType
from .transport import Transport, raise_for_status, split_lines

MERGE_PATCH = "application/merge-patch+json"
INVALID = "INVALID"  # watch marker for a line we refused to decode


class KubeClient(Transport):
    async def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj | None:
        try:
            return await self.request("GET", rt.object_path(namespace, name))
        except NotFound:
            return None

    async def list(
        self,
        rt: ResourceType,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        page_size: int = 500,
        on_bad_item: Callable[[jsondepth.TooDeep], None] | None = None,
    ) -> tuple[list[Obj], str]:
        """All items, page by page, and the list's resourceVersion to watch from.

        An item nested too deep fails the whole list, unless on_bad_item is given: then
        it is reported there and left out, and the other items are returned.
        """
        items: list[Obj] = []
        query: dict[str, str] = {"limit": str(page_size)}
        if label_selector:
            query["labelSelector"] = label_selector
        path = rt.collection_path(namespace)
        while True:
            page = await self._list_page(path, query, on_bad_item)
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                return items, str(meta.get("resourceVersion", ""))
            query["continue"] = token

    async def reached(
        self,
        rt: ResourceType,
        resource_version: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
    ) -> str:
        """The server's resourceVersion, read with the cheapest list that asks for at
        least resource_version (resourceVersionMatch=NotOlderThan, one item).

        kube-apiserver reads a paginated list from etcd and, where etcd's revision is
        older than the one asked for (etcd restored from a backup), answers 504 Timeout
        with the cause ResourceVersionTooLarge (ApiError.causes), at once.
        """
        query = {
            "limit": "1",
            "resourceVersion": resource_version,
            "resourceVersionMatch": "NotOlderThan",
        }
        if label_selector:
            query["labelSelector"] = label_selector
        # The item is not read: one too deep to decode is left out, not an error.
        page = await self._list_page(rt.collection_path(namespace), query, lambda _: None)
        meta = page.get("metadata") or {}
        return str(meta.get("resourceVersion", ""))

    async def _list_page(
        self,
        path: str,
        query: dict[str, str],
        on_bad_item: Callable[[jsondepth.TooDeep], None] | None,
    ) -> Obj:
        reply = await self._send("GET", path, query=query)
        data = reply.body
        raise_for_status(reply)
        # Items sit 2 levels below the List (the List, its items array).
        page_limit = jsondepth.MAX_DEPTH + 2
        if on_bad_item is None or jsondepth.depth(data, page_limit) <= page_limit:
            page: Obj = jsondepth.loads(data, page_limit)
            return page
        envelope, raw_items = jsondepth.split_list(data)
        good: list[Obj] = []
        for raw in raw_items:
            try:
                good.append(jsondepth.loads(raw))
            except jsondepth.TooDeep as e:
                on_bad_item(e)
        envelope["items"] = good
        return envelope

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
        with contextlib.suppress(NotFound):
            await self.request("DELETE", rt.object_path(namespace, name))

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
        response = await self._stream(rt.collection_path(namespace), query, timeout)
        async with response:
            if response.status >= 400:
                raise error_from(
                    response.status,
                    await response.text(),
                    parse_retry_after(response.headers.get("Retry-After")),
                )
            async for line in split_lines(response.content.iter_any()):
                if not line.strip():
                    continue
                try:  # the event wraps the object: one level more
                    yield jsondepth.loads(line, jsondepth.MAX_DEPTH + 1)
                except (jsondepth.TooDeep, ValueError, RecursionError) as e:
                    # One bad object must not end the stream: hand the reader a marker.
                    yield {
                        "type": INVALID,
                        "object": {},
                        "error": str(e),
                        "key": jsondepth.guess_key(line),
                    }
