"""Decoding of the protobuf bodies kubectl sends for built-in kinds (`kubectl create ns`).

kubectl 1.27-1.33 posts typed objects as `application/vnd.kubernetes.protobuf` and does not
retry as JSON on a 415, so the server reads the wire format for the kinds `kubectl create`
makes from flags: Namespace, ConfigMap, Secret, ServiceAccount. Answers stay JSON, which
kubectl's Accept header allows. Other kinds get 415 naming the kind.
"""

from __future__ import annotations

import base64
from typing import Any

from objtypes import Obj

from .storage import StorageError

PROTOBUF = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"
Fields = list[tuple[int, int, Any]]


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def fields(data: bytes) -> Fields:
    """(number, wire type, value) of each field; length-delimited values stay bytes."""
    out: Fields = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            size, pos = _varint(data, pos)
            value, pos = data[pos : pos + size], pos + size
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        out.append((number, wire, value))
    return out


def _str(value: bytes) -> str:
    return value.decode()


def _map(entries: list[bytes], as_bytes: bool = False) -> dict[str, str]:
    result = {}
    for entry in entries:
        kv = {n: v for n, _, v in fields(entry)}
        raw = kv.get(2, b"")
        value = base64.b64encode(raw).decode() if as_bytes else raw.decode()
        result[kv.get(1, b"").decode()] = value
    return result


def _repeated(fs: Fields, number: int) -> list[Any]:
    return [v for n, _, v in fs if n == number]


def _one(fs: Fields, number: int) -> Any:
    values = _repeated(fs, number)
    return values[-1] if values else None


def _metadata(data: bytes) -> Obj:
    fs = fields(data)
    meta: Obj = {}
    for number, key in ((1, "name"), (2, "generateName"), (3, "namespace")):
        if value := _one(fs, number):
            meta[key] = _str(value)
    if labels := _repeated(fs, 11):
        meta["labels"] = _map(labels)
    if annotations := _repeated(fs, 12):
        meta["annotations"] = _map(annotations)
    if finalizers := _repeated(fs, 14):
        meta["finalizers"] = [_str(f) for f in finalizers]
    return meta


def _namespace(fs: Fields, obj: Obj) -> None:
    if spec := _one(fs, 2):
        finalizers = [_str(f) for f in _repeated(fields(spec), 1)]
        if finalizers:
            obj["spec"] = {"finalizers": finalizers}


def _configmap(fs: Fields, obj: Obj) -> None:
    if data := _repeated(fs, 2):
        obj["data"] = _map(data)
    if binary := _repeated(fs, 3):
        obj["binaryData"] = _map(binary, as_bytes=True)
    if (immutable := _one(fs, 4)) is not None:
        obj["immutable"] = bool(immutable)


def _secret(fs: Fields, obj: Obj) -> None:
    if data := _repeated(fs, 2):
        obj["data"] = _map(data, as_bytes=True)
    if type_ := _one(fs, 3):
        obj["type"] = _str(type_)
    if string_data := _repeated(fs, 4):
        obj["stringData"] = _map(string_data)
    if (immutable := _one(fs, 5)) is not None:
        obj["immutable"] = bool(immutable)


def _serviceaccount(fs: Fields, obj: Obj) -> None:
    if (automount := _one(fs, 4)) is not None:
        obj["automountServiceAccountToken"] = bool(automount)


_KINDS = {
    ("v1", "Namespace"): _namespace,
    ("v1", "ConfigMap"): _configmap,
    ("v1", "Secret"): _secret,
    ("v1", "ServiceAccount"): _serviceaccount,
}


def decode(body: bytes) -> Obj:
    """A protobuf-encoded object as the JSON object it stands for."""
    if not body.startswith(_MAGIC):
        raise StorageError(400, "BadRequest", "protobuf body without the k8s envelope")
    try:
        unknown = fields(body[len(_MAGIC) :])
        type_meta = fields(_one(unknown, 1) or b"")
        api_version = _str(_one(type_meta, 1) or b"")
        kind = _str(_one(type_meta, 2) or b"")
        decoder = _KINDS.get((api_version, kind))
        if decoder is None:
            raise StorageError(
                415,
                "UnsupportedMediaType",
                f"this test server reads protobuf only for {sorted(k for _, k in _KINDS)}; "
                f"send {api_version} {kind} as application/json",
            )
        raw = fields(_one(unknown, 2) or b"")
        obj: Obj = {"apiVersion": api_version, "kind": kind}
        obj["metadata"] = _metadata(_one(raw, 1) or b"")
        decoder(raw, obj)
        return obj
    except (ValueError, UnicodeDecodeError) as e:
        raise StorageError(400, "BadRequest", f"invalid protobuf body: {e}") from e
