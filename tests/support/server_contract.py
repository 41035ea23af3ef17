"""Shared by the test server's own contract tests: raw HTTP calls and CRDs of their own.

The CRDs here are not LLMKube's: the server's CRD engine must be generic over any
apiextensions.k8s.io/v1 CustomResourceDefinition.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from objtypes import Obj

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.test/v1/namespaces/default/widgets"

WIDGET_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.test}
spec:
  group: example.test
  scope: Namespaced
  names:
    kind: Widget
    plural: widgets
    singular: widget
    shortNames: [wdg]
    categories: [gadgets]
  versions:
    - name: v1
      served: true
      storage: true
      subresources:
        status: {}
        scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
      additionalPrinterColumns:
        - {name: Size, type: string, jsonPath: .spec.size}
        - {name: Replicas, type: integer, jsonPath: .spec.replicas}
        - {name: Ready, type: string, jsonPath: '.status.conditions[?(@.type=="Ready")].status'}
        - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              required: [size]
              x-kubernetes-validations:
                - rule: "self.minReplicas <= self.replicas"
                  message: replicas must be at least minReplicas
              properties:
                size: {type: string, enum: [small, large]}
                replicas: {type: integer, minimum: 0, maximum: 10, default: 1}
                minReplicas: {type: integer, default: 0}
                owner: {type: string, pattern: '^[a-z]+$', maxLength: 8}
                immutableId:
                  type: string
                  x-kubernetes-validations:
                    - {rule: "self == oldSelf", message: immutableId is immutable}
                tags: {type: object, additionalProperties: {type: string}}
                free: {type: object, x-kubernetes-preserve-unknown-fields: true}
                ports:
                  type: array
                  maxItems: 2
                  items:
                    type: object
                    required: [port]
                    properties:
                      port: {type: integer, minimum: 1}
            status:
              type: object
              properties:
                replicas: {type: integer}
                conditions:
                  type: array
                  items: {type: object, x-kubernetes-preserve-unknown-fields: true}
"""

# Cluster-scoped, no status subresource, schema that keeps everything.
GIZMO_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.example.test}
spec:
  group: example.test
  scope: Cluster
  names: {kind: Gizmo, plural: gizmos, singular: gizmo}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"""


async def call(
    url: str,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    data = None
    if body is not None:
        data = body if isinstance(body, bytes | str) else json.dumps(body)
    async with (
        aiohttp.ClientSession() as session,
        session.request(
            method,
            url + path,
            data=data,
            headers={"Content-Type": content_type, **(headers or {})},
        ) as resp,
    ):
        text = await resp.text()
        return resp.status, json.loads(text) if text else None


async def install(url: str, *manifests: str) -> None:
    for manifest in manifests:
        status, body = await call(url, "POST", CRD_PATH, yaml.safe_load(manifest))
        assert status == 201, body


def widget(name: str, **spec: Any) -> Obj:
    return {
        "apiVersion": "example.test/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": "small", **spec},
    }


async def kubectl(url: str, *args: str, stdin: str | None = None) -> tuple[int, str]:
    """Run kubectl against the server; returns (exit code, stdout + stderr)."""
    env = {**os.environ, "KUBECONFIG": "/dev/null", "HOME": os.environ.get("HOME", "/tmp")}
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        "--server",
        url,
        "--cache-dir",
        str(Path(os.environ.get("TMPDIR", "/tmp")) / f"kubectl-cache-{os.getpid()}"),
        *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else None,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
    )
    out, _ = await proc.communicate(stdin.encode() if stdin is not None else None)
    return proc.returncode or 0, out.decode()
