"""Errors answered as metav1.Status, the shape kubectl and client-go decode."""

from __future__ import annotations

from aiohttp import web

from objtypes import Obj


def status_body(code: int, reason: str, message: str, details: Obj | None = None) -> Obj:
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


def error_response(
    code: int, reason: str, message: str, details: Obj | None = None
) -> web.Response:
    response = web.json_response(status_body(code, reason, message, details), status=code)
    # As kube-apiserver: a Status that names a wait carries it as Retry-After too.
    retry = (details or {}).get("retryAfterSeconds")
    if isinstance(retry, int) and retry > 0:
        response.headers["Retry-After"] = str(retry)
    return response
