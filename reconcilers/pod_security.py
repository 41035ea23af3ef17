"""The pods we build, hardened by default: serving pods (the Deployment's template,
multiNode member Pods) and the prefetch Jobs' pods.

- The pod: `seccompProfile: RuntimeDefault` and `fsGroup` (`--default-fsgroup`, chart
  `servingPods.defaultFSGroup`; 102, the loader image's group, as LLMKube; 0: none, e.g.
  for OpenShift, whose SCC assigns one), as LLMKube; and
  `automountServiceAccountToken: false`: neither the runtime nor the loader talks to the
  API server, so no token of the namespace's service account sits in them.
- The runtime container: `allowPrivilegeEscalation: false` and every capability dropped,
  as LLMKube; NET_BIND_SERVICE is kept when it listens below 1024 (`containerPort: 80`).
- The loader container: the same.
- A loader writing a cache claim gets `model-cache-prep` before it (cache_prep.py).
- In a namespace that enforces Pod Security `restricted` (its label
  `pod-security.kubernetes.io/enforce: restricted`), the pod also runs as non-root:
  `runAsNonRoot: true`, `runAsUser`/`runAsGroup` 65532 (the serving images run as root or
  as a named user the kubelet cannot check), and no `model-cache-prep` (root with CHOWN
  and FOWNER, which that profile refuses): the kubelet's fsGroup ownership of the cache
  volume lets the loader write it. Without this the ReplicaSet's pods are refused.

`spec.podSecurityContext` and `spec.securityContext` win key by key: each key the user
sets replaces ours (`capabilities` whole), the keys they leave out keep our defaults.
`allowPrivilegeEscalation: false` is left out where the user's context makes the API
server refuse it (`privileged: true`, or SYS_ADMIN added).
"""

from __future__ import annotations

import copy

from controller.cache import Cache
from controller.resources import NAMESPACE
from objtypes import Obj
from reconcilers.sources.cache_prep import cache_prep_container
from reconcilers.sources.loader import LOADER_NAME, MODEL_DIR

DEFAULT_FS_GROUP = 102  # curlimages/curl's group (LLMKube's --default-fsgroup)
ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
RESTRICTED_USER = 65532  # the conventional "nonroot" uid and gid (the controller's own)
PRIVILEGED_PORTS = 1024
_ESCALATING_CAPS = ("SYS_ADMIN", "CAP_SYS_ADMIN")


def enforces_restricted(namespace: Obj | None) -> bool:
    """The Namespace's Pod Security admission enforces the `restricted` profile."""
    labels = ((namespace or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(ENFORCE_LABEL) == "restricted"


def restricted_namespace(cache: Cache, namespace: str) -> bool:
    """enforces_restricted for the cached Namespace (the controllers watch Namespaces)."""
    return enforces_restricted(cache.get(NAMESPACE, "", namespace))


def pod_security_context(user: Obj | None, fs_group: int, restricted: bool = False) -> Obj:
    """Ours (seccomp RuntimeDefault, fsGroup when > 0, non-root under `restricted`) under
    the user's keys."""
    ours: Obj = {"seccompProfile": {"type": "RuntimeDefault"}}
    if fs_group > 0:
        ours["fsGroup"] = fs_group
    if restricted:
        ours.update(runAsNonRoot=True, runAsUser=RESTRICTED_USER, runAsGroup=RESTRICTED_USER)
    return {**ours, **copy.deepcopy(user or {})}


def container_security_context(user: Obj | None, port: int | None = None) -> Obj:
    """Ours (no privilege escalation, no capabilities) under the user's keys."""
    capabilities: Obj = {"drop": ["ALL"]}
    if port is not None and port < PRIVILEGED_PORTS:
        capabilities["add"] = ["NET_BIND_SERVICE"]
    merged: Obj = {
        "allowPrivilegeEscalation": False,
        "capabilities": capabilities,
        **copy.deepcopy(user or {}),
    }
    added = (merged.get("capabilities") or {}).get("add") or []
    escalates = merged.get("privileged") is True or any(c in _ESCALATING_CAPS for c in added)
    if escalates and "allowPrivilegeEscalation" not in (user or {}):
        del merged["allowPrivilegeEscalation"]  # the API server refuses the pair
    return merged


def _group(pod_context: Obj) -> int | None:
    group = pod_context.get("fsGroup")
    return group if isinstance(group, int) and group > 0 else None


def harden(
    spec: Obj,
    fs_group: int,
    *,
    user_pod: Obj | None = None,
    user_container: Obj | None = None,
    runtime_port: int | None = None,
    cache_volume: str | None = None,
    restricted: bool = False,
) -> None:
    """Harden a pod spec in place. runtime_port: the first container is the runtime,
    listening there (None: no runtime, a prefetch Job); cache_volume: the cache claim's
    volume the loader writes (None: an emptyDir, or no loader); restricted: the namespace
    enforces Pod Security `restricted`."""
    spec["automountServiceAccountToken"] = False
    pod_context = pod_security_context(user_pod, fs_group, restricted)
    spec["securityContext"] = pod_context
    if runtime_port is not None:
        runtime = spec["containers"][0]
        runtime["securityContext"] = container_security_context(user_container, runtime_port)
    inits = spec.get("initContainers") or []
    loaders = [c for c in (*inits, *spec["containers"]) if c.get("name") == LOADER_NAME]
    for loader in loaders:
        loader.setdefault("securityContext", container_security_context(None))
    if cache_volume is None or not loaders or pod_context.get("runAsNonRoot") is True:
        return
    writes = any(
        m.get("name") == cache_volume and m.get("mountPath") == MODEL_DIR
        for loader in loaders
        for m in loader.get("volumeMounts") or []
    )
    if writes:
        spec["initContainers"] = [cache_prep_container(cache_volume, _group(pod_context)), *inits]
