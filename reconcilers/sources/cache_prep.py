"""model-cache-prep: the init container that lets the non-root loader write a cache PVC.

The loader's image runs as a non-root user. On most volumes the pod's fsGroup makes the
cache writable: the kubelet gives the volume that group (and every container of the pod
the group as a supplementary one). CSI drivers with `fsGroupPolicy: None` (NFS, CephFS
and others) skip that step, so the claim's root stays `root:root 0755` and the loader's
`mkdir /models/<cacheKey>` is refused. LLMKube answers with this same step, run before
the loader whenever it writes a cache claim:

- with an fsGroup (the user's `podSecurityContext.fsGroup`, else `--default-fsgroup`):
  the mount root becomes `root:<fsGroup>` with group rwx and setgid, so the loader (in
  that group) may create its folder, and what it creates keeps the group;
- without one: the root becomes `1777` (as /tmp): any loader user may create its cacheKey
  folder, and none may remove another's.

Only the mount root is changed, never what is below it. The step runs as root with every
capability dropped except CHOWN and FOWNER (what chown and chmod of a folder someone else
owns need), without privilege escalation and on a read-only root filesystem: the
kubelet's Pod Security "baseline" admits it, "restricted" does not (no root, no added
capability); there, use a CSI driver that applies fsGroup or the Ephemeral cache.
It is left out when the pod says `runAsNonRoot: true` (the kubelet would refuse a root
container): the user has then taken the volume's permissions on.
"""

from __future__ import annotations

import copy

from objtypes import Obj

from .loader import LOADER_IMAGE, MODEL_DIR

PREP_NAME = "model-cache-prep"
# Inputs through env only; the script is constant.
SCRIPT = r"""set -eu
dir="$PREP_DIR"
if [ -n "${PREP_GROUP:-}" ]; then
  chown "0:$PREP_GROUP" "$dir"
  chmod g+rwxs "$dir"
else
  chmod 1777 "$dir"
fi
echo "prepared $dir for the loader"
"""
SECURITY_CONTEXT: Obj = {
    "runAsUser": 0,
    "runAsNonRoot": False,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "FOWNER"]},
}


def cache_prep_container(volume: str, group: int | None) -> Obj:
    """The prep of the cache volume `volume` (mounted at /models, as the loader mounts
    it); group: the pod's fsGroup, None when it has none."""
    env: list[Obj] = [{"name": "PREP_DIR", "value": MODEL_DIR}]
    if group:
        env.append({"name": "PREP_GROUP", "value": str(group)})
    return {
        "name": PREP_NAME,
        "image": LOADER_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", SCRIPT],
        "env": env,
        "volumeMounts": [{"name": volume, "mountPath": MODEL_DIR}],
        "securityContext": copy.deepcopy(SECURITY_CONTEXT),
    }
