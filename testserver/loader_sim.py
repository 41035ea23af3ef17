"""The simulated kubelet's model loader: runs a pod's `model-loader` as the real script
would (reconcilers/sources/loader.py), from the env it was given, against a simulated volume.

A "download" of URL u yields the bytes `simulated_body(u)`, so a test knows the sha256 a
loader will report. Each file's pin (LOADER_SHA256_<i>) is checked; the report lists every
file with its digest source: `spec` when pinned, else `hub` for hub sources (LOADER_HUB:
the simulated hub vouches for every file, as the real one does for LFS files) or
`computed`. Files written into a PVC stay there for every later pod that mounts
it (the cache); an emptyDir lives as long as its pod. The result is the loader's
termination message and exit code, reported as the kubelet does: an init container
`terminated` (Completed), or, on failure, `waiting` CrashLoopBackOff with the failed run in
`lastState` (the simulator does not retry: a mismatch would fail again).

Pod annotation `sim.llmkube.dev/loader-seconds: N` keeps the loader running N seconds
first (the demo shows Downloading; a test can hold a loader with a large N).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from objtypes import Obj

LOADER = "model-loader"
HOLD_ANNOTATION = "sim.llmkube.dev/loader-seconds"


def simulated_body(url: str) -> bytes:
    return f"simulated model file from {url}\n".encode()


def simulated_sha256(url: str) -> str:
    return hashlib.sha256(simulated_body(url)).hexdigest()


@dataclass
class Volumes:
    """Files by volume: (namespace, claim) for a PVC, (namespace, pod uid) for an emptyDir."""

    files: dict[tuple[str, str], dict[str, tuple[str, int]]] = field(default_factory=dict)
    downloads: list[str] = field(default_factory=list)  # every URL fetched, in order


def loader_of(spec: Obj) -> Obj | None:
    for c in (*(spec.get("initContainers") or ()), *(spec.get("containers") or ())):
        if c.get("name") == LOADER:
            found: Obj = c
            return found
    return None


def _volume_key(pod: Obj, container: Obj) -> tuple[str, str]:
    ns = pod["metadata"]["namespace"]
    mount: Obj = next(iter(container.get("volumeMounts") or []), {})
    for v in pod["spec"].get("volumes") or []:
        if v.get("name") == mount.get("name") and v.get("persistentVolumeClaim"):
            return ns, "pvc:" + v["persistentVolumeClaim"]["claimName"]
    return ns, "pod:" + pod["metadata"]["uid"]


def run_loader(volumes: Volumes, pod: Obj, container: Obj) -> tuple[int, Obj]:
    env = {e["name"]: e["value"] for e in container.get("env") or [] if "value" in e}
    files = volumes.files.setdefault(_volume_key(pod, container), {})
    key = env.get("LOADER_CACHE_KEY", "")
    # The simulated hub vouches for every file it serves (as for LFS files).
    unpinned = "hub" if env.get("LOADER_HUB") else "computed"
    staged: list[str] = []
    downloaded: list[str] = []
    report: list[Obj] = []
    for i in range(int(env.get("LOADER_COUNT") or 0)):
        url, rel = env.get(f"LOADER_URL_{i}", ""), env.get(f"LOADER_FILE_{i}", "")
        pin = env.get(f"LOADER_SHA256_{i}")
        path = f"{env.get('LOADER_DIR', '/models')}/{rel}"
        if path not in files:
            volumes.downloads.append(url)
            body = simulated_body(url)
            digest = hashlib.sha256(body).hexdigest()
            if pin and digest != pin:
                return 1, _mismatch(key, rel, pin, digest)
            files[path] = (digest, len(body))
            downloaded.append(rel)
        digest, size = files[path]
        if pin and digest != pin:
            return 1, _mismatch(key, rel, pin, digest)
        source = "spec" if pin else unpinned
        report.append({"name": rel, "size": size, "sha256": digest, "digestSource": source})
        staged.append(rel)
    primary = report[0] if report else {"size": 0, "sha256": ""}
    return 0, {
        "cacheKey": key,
        "path": env.get("LOADER_PATH", ""),
        "size": str(primary["size"]),
        "sha256": primary["sha256"],
        "stagedFiles": staged,
        "downloaded": downloaded,
        "sourceETag": "",
        "files": report,
        "filesOmitted": 0,
    }


def _mismatch(key: str, rel: str, expected: str, actual: str) -> Obj:
    return {
        "cacheKey": key,
        "error": "Sha256Mismatch",
        "file": rel,
        "expected": expected,
        "actual": actual,
        "expectedFrom": "spec",
    }
