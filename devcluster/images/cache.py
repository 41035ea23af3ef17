"""The image tars' cache: each is rebuilt only when the digest of its inputs changes."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@dataclass(frozen=True)
class Built:
    name: str
    tar: Path


def _digest_of(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
        for f in files:
            h.update(str(f.relative_to(p.parent if p.is_dir() else f.parent)).encode())
            h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def _cached(dest: Path, slug: str, key: str, make: Callable[[Path], None]) -> Path:
    """dest/slug.tar, made by `make(tar)` unless the tar there was made from `key`."""
    tar, stamp = dest / f"{slug}.tar", dest / f"{slug}.key"
    key += _digest_of([HERE / "oci.py", HERE / "rootfs.py", HERE / "build.py", HERE / "cache.py"])
    if tar.is_file() and stamp.is_file() and stamp.read_text() == key:
        return tar
    make(tar)
    stamp.write_text(key)
    return tar
