"""The InferenceService's pod and container fields, applied onto the pod spec we build,
as LLMKube's deployment builder applies them.

- `command` replaces the container's command (the runtime's args stay ours);
- `probeOverrides` replace our probes kind by kind (not on vLLM's headless multiNode
  members, which serve no HTTP);
- `skipModelInit` drops the model loader and the model volume: the model is in the
  image, or fetched by the runtime, or mounted from `extraVolumes`;
- `extraVolumes` / `extraVolumeMounts` are appended after ours;
- `podSecurityContext` / `securityContext` are the pod's and the container's;
- `revisionHistoryLimit` is the Deployment's.

`containerPort` and `bindAddress` become the runtime's own flags (runtimes/pod_flags.py):
the container port, probes and Service follow the port the runtime really listens on.
"""

from __future__ import annotations

import copy

from api import InferenceServiceSpec
from api.podfields import MODEL_MOUNT
from objtypes import Obj


def _skip_model_init(spec: Obj, container: Obj) -> None:
    spec.pop("initContainers", None)
    model_mounts = [m for m in container.get("volumeMounts") or [] if m["mountPath"] == MODEL_MOUNT]
    dropped = {m["name"] for m in model_mounts}
    container["volumeMounts"] = [
        m for m in container.get("volumeMounts") or [] if m not in model_mounts
    ]
    spec["volumes"] = [v for v in spec.get("volumes") or [] if v["name"] not in dropped]
    for key, holder in (("volumeMounts", container), ("volumes", spec)):
        if not holder[key]:
            del holder[key]


def apply_pod_fields(spec: Obj, service: InferenceServiceSpec, serves_http: bool) -> None:
    """Apply the user's pod fields onto spec (a pod spec whose first container runs the
    runtime), in place."""
    f = service.fields
    container = spec["containers"][0]
    if f.command:
        container["command"] = list(f.command)
    if serves_http:
        for kind, probe in f.probes.items():
            container[f"{kind}Probe"] = copy.deepcopy(probe)
    if f.skip_model_init:
        _skip_model_init(spec, container)
    if f.extra_volumes:
        spec["volumes"] = [*spec.get("volumes", []), *copy.deepcopy(list(f.extra_volumes))]
    if f.extra_volume_mounts:
        mounts = copy.deepcopy(list(f.extra_volume_mounts))
        container["volumeMounts"] = [*container.get("volumeMounts", []), *mounts]
    if f.pod_security_context is not None:
        spec["securityContext"] = copy.deepcopy(f.pod_security_context)
    if f.security_context is not None:
        container["securityContext"] = copy.deepcopy(f.security_context)


def deployment_fields(service: InferenceServiceSpec) -> Obj:
    """The Deployment spec's own fields from the InferenceService."""
    limit = service.fields.revision_history_limit
    return {} if limit is None else {"revisionHistoryLimit": limit}
