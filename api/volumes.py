"""hostPath volumes in an InferenceService's `extraVolumes`: the operator's host-path roots.

A hostPath volume mounts a directory of the node into the pod, so an InferenceService
author could read (or, mounted read-write, change) any file of the node: the kubelet's
credentials, other pods' volumes, the container runtime's socket. The same roots that
bound host-path Model sources (`--allowed-host-path-roots`, chart
`modelSource.allowedHostPathRoots`; none by default) bound these volumes too, unless the
operator allows every hostPath volume (`--allow-any-extra-volume-host-path`, chart
`servingPods.allowAnyExtraVolumeHostPath`, off by default).

Lexical like the Model check: the path must be absolute, without `..`, and equal to a
root or below one (symlinks inside a root are trusted).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .source import normalised_roots

ROOTS_FLAG = "--allowed-host-path-roots"
ANY_FLAG = "--allow-any-extra-volume-host-path"


def _normalised(path: str) -> str:
    return "/" + "/".join(p for p in path.split("/") if p not in ("", "."))


def host_path_volume_errors(
    volumes: Iterable[Any], roots: tuple[str, ...], allow_any: bool = False
) -> list[str]:
    """Why each hostPath volume of spec.extraVolumes may not be mounted, by field path."""
    if allow_any:
        return []
    usable = normalised_roots(roots)
    errors = []
    for i, volume in enumerate(volumes):
        host = volume.get("hostPath") if isinstance(volume, dict) else None
        if host is None:
            continue
        field = f"spec.extraVolumes[{i}].hostPath.path"
        path = host.get("path") if isinstance(host, dict) else None
        if not isinstance(path, str) or not path.startswith("/"):
            errors.append(f"{field}: {path!r} is not an absolute path")
            continue
        if ".." in path.split("/"):
            errors.append(f"{field}: {path!r} climbs with '..'")
            continue
        if not usable:
            errors.append(
                f"{field}: {path!r} is a host path, and hostPath volumes are disabled: the "
                f"operator allows no root ({ROOTS_FLAG}, chart "
                f"modelSource.allowedHostPathRoots; or {ANY_FLAG})"
            )
            continue
        clean = _normalised(path)
        if not any(r == "/" or clean == r or clean.startswith(r + "/") for r in usable):
            errors.append(
                f"{field}: {path!r} is not under an allowed host-path root "
                f"({', '.join(usable)}; {ROOTS_FLAG})"
            )
    return errors
