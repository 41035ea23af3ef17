"""OCI images written with the standard library: a rootfs folder packed as one gzip layer,
its config, a manifest and an index, either as a tar (`ctr images import` loads it) or
as an OCI layout folder (BuildKit reads one as a named build context).

The layer is reproducible (sorted entries, numeric owner 0 unless the rootfs says
otherwise, mtime 0), so an unchanged rootfs gives the same digests.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
# The annotation containerd's import reads the image's name from.
NAME_ANNOTATION = "io.containerd.image.name"
REF_ANNOTATION = "org.opencontainers.image.ref.name"
VIRTUAL = {"dev", "proc", "sys"}


@dataclass(frozen=True)
class ImageConfig:
    """The runtime part of an image config (what `docker inspect` calls Config)."""

    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    env: list[str] = field(
        default_factory=lambda: [
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        ]
    )
    user: str = ""
    workdir: str = ""
    labels: dict[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"Env": self.env}
        if self.entrypoint:
            out["Entrypoint"] = self.entrypoint
        if self.cmd:
            out["Cmd"] = self.cmd
        if self.user:
            out["User"] = self.user
        if self.workdir:
            out["WorkingDir"] = self.workdir
        if self.labels:
            out["Labels"] = self.labels
        return out


@dataclass(frozen=True)
class Blob:
    digest: str  # sha256:<hex>
    size: int
    data: bytes

    @staticmethod
    def of(data: bytes) -> Blob:
        return Blob("sha256:" + hashlib.sha256(data).hexdigest(), len(data), data)


@dataclass(frozen=True)
class Layer:
    blob: Blob
    diff_id: str  # the digest of the uncompressed tar (the config's rootfs.diff_ids)


def _reset(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.mtime = 0
    info.uname = info.gname = ""
    return info


def pack_layer(rootfs: Path, owners: dict[str, tuple[int, int]] | None = None) -> Layer:
    """The rootfs as one layer. `owners`: uid, gid per path relative to the rootfs
    (others keep their own, which a rootfs built here as root has as 0)."""
    owners = owners or {}
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(rootfs):
            dirnames.sort()
            for name in sorted(dirnames) + sorted(filenames):
                path = Path(dirpath) / name
                rel = path.relative_to(rootfs).as_posix()
                found = tar.gettarinfo(str(path), arcname=rel)
                # The runtime mounts /dev, /proc and /sys; sockets do not pack.
                if found is None or (rel.split("/", 1)[0] in VIRTUAL and "/" in rel):
                    continue
                info = _reset(found)
                if rel in owners:
                    info.uid, info.gid = owners[rel]
                if info.isreg():
                    with path.open("rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    plain = raw.getvalue()
    packed = gzip.compress(plain, compresslevel=6, mtime=0)
    return Layer(Blob.of(packed), "sha256:" + hashlib.sha256(plain).hexdigest())


@dataclass(frozen=True)
class Image:
    manifest: Blob
    config: Blob
    layers: tuple[Layer, ...]

    @property
    def blobs(self) -> list[Blob]:
        return [self.manifest, self.config, *(layer.blob for layer in self.layers)]


def _arch() -> str:
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, "amd64")


def image(layers: list[Layer], config: ImageConfig) -> Image:
    config_json = {
        "architecture": _arch(),
        "os": "linux",
        "config": config.as_json(),
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
        "history": [{"created_by": "devcluster/images", "comment": "stand-in build"}],
    }
    config_blob = Blob.of(json.dumps(config_json, sort_keys=True).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": {
            "mediaType": MEDIA_CONFIG,
            "digest": config_blob.digest,
            "size": config_blob.size,
        },
        "layers": [
            {"mediaType": MEDIA_LAYER, "digest": layer.blob.digest, "size": layer.blob.size}
            for layer in layers
        ],
    }
    return Image(Blob.of(json.dumps(manifest, sort_keys=True).encode()), config_blob, tuple(layers))


def _index(img: Image, name: str) -> bytes:
    tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else "latest"
    return json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": MEDIA_INDEX,
            "manifests": [
                {
                    "mediaType": MEDIA_MANIFEST,
                    "digest": img.manifest.digest,
                    "size": img.manifest.size,
                    "platform": {"architecture": _arch(), "os": "linux"},
                    "annotations": {NAME_ANNOTATION: name, REF_ANNOTATION: tag},
                }
            ],
        },
        sort_keys=True,
    ).encode()


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = _reset(tarfile.TarInfo(name))
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def write_tar(img: Image, name: str, dest: Path) -> Path:
    """An OCI archive of `img` named `name` (a full reference: docker.io/library/x:tag),
    written atomically."""
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    with tarfile.open(tmp, mode="w") as tar:
        _add(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        _add(tar, "index.json", _index(img, name))
        seen = set()
        for blob in img.blobs:
            if blob.digest not in seen:
                seen.add(blob.digest)
                _add(tar, f"blobs/sha256/{blob.digest.removeprefix('sha256:')}", blob.data)
    tmp.replace(dest)
    return dest


def write_layout(img: Image, name: str, dest: Path) -> str:
    """An OCI layout folder of `img`; returns the manifest digest (BuildKit's
    oci-layout:// context wants the digest, not a tag)."""
    blobs = dest / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    (dest / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    for blob in img.blobs:
        (blobs / blob.digest.removeprefix("sha256:")).write_bytes(blob.data)
    (dest / "index.json").write_bytes(_index(img, name))
    return img.manifest.digest


def full_name(name: str) -> str:
    """The reference as containerd (and the kubelet) normalise it: docker.io and library/."""
    first = name.split("/", 1)[0]
    if "/" not in name:
        return f"docker.io/library/{name}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{name}"
    return name
