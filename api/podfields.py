"""The InferenceService's pod and container fields, and llama.cpp's ropeScaling and
speculativeDecoding: what LLMKube's deployment builder takes from the spec as it is.

The schema (api/inferenceservice.py) checks types and bounds; the checks here refuse,
by field path, what the API server would refuse when the Deployment is written (a probe
with no handler, a mount of a volume that does not exist, two volumes of one name) or
what would start a pod that never serves (a loopback bind address the probes and the
Service cannot reach), so the user sees it on the InferenceService, and the webhook
refuses it up front.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from objtypes import Obj

DEFAULT_BIND_ADDRESS = "::"  # the CRD's default, written into every object
# rolloutPolicy.idleTimeoutSeconds: the CRD's default, also for 0 (LLMKube's reading).
DEFAULT_IDLE_TIMEOUT = 300
# Seconds fields are clamped here (LLMKube's boundedSeconds), so no arithmetic on them
# overflows: about 292 years.
MAX_SECONDS = 9_223_372_036
PROBE_KINDS = ("startup", "liveness", "readiness")
PROBE_HANDLERS = ("httpGet", "tcpSocket", "exec", "grpc")
# The volume (and mount path) the model is loaded from (reconcilers/sources/loader.py MODEL_DIR).
MODEL_VOLUME, MODEL_MOUNT = "models", "/models"
# llama.cpp's --spec-type: LLMKube's aliases, and the types that turn it off.
SPEC_TYPE_ALIASES = {"mtp": "draft-mtp", "draft": "draft-simple"}
SPEC_TYPES_OFF = ("none", "disabled")
SPEC_TYPES = (
    "draft-simple",
    "draft-eagle3",
    "draft-mtp",
    "draft-dflash",
    "draft-dspark",
    "ngram-simple",
    "ngram-map-k",
    "ngram-map-k4v",
    "ngram-mod",
    "ngram-cache",
)
# ropeScaling.factor: LLMKube's pattern (a decimal string), and its whole-value twin
# (Python's `$` also matches before a trailing newline; the CRD's does not).
ROPE_FACTOR_PATTERN = r"^[0-9]+(\.[0-9]+)?$"
# ropeScaling.type: what LLMKube's enum takes and llama.cpp's `none`; and what b10068's
# `--rope-scaling {none,linear,yarn}` takes (anything else: "invalid value", exit 1).
ROPE_TYPES = ("none", "linear", "yarn", "longrope")
LLAMACPP_ROPE_TYPES = ("none", "linear", "yarn")
_ROPE_FACTOR = re.compile(r"[0-9]+(\.[0-9]+)?")
# Types that need draft weights (LLMKube's CEL rule); draft-mtp may carry its own.
DRAFT_WEIGHTS = ("draft-simple", "draft-eagle3", "draft-dflash", "draft-dspark")


@dataclass(frozen=True)
class RopeScaling:
    type: str
    factor: str | None = None  # llama.cpp's --rope-scale, as the spec writes it ("2.0")
    original_context: int | None = None


@dataclass(frozen=True)
class Speculative:
    type: str  # llama.cpp's --spec-type spelling (aliases resolved)
    n_draft_max: int | None = None
    p_min: float | None = None
    draft_weights: str | None = None  # draftModelRef or draftModel (not staged yet)


@dataclass(frozen=True)
class Disruption:
    protect_startup: bool = True
    protect_always: bool = False


@dataclass(frozen=True)
class RolloutPolicy:
    """spec.rolloutPolicy: hold a pod-template change until the replicas are idle."""

    wait_for_idle: bool = False
    idle_timeout_seconds: int = DEFAULT_IDLE_TIMEOUT  # 0 in the spec: the default (LLMKube)
    force: bool = False

    @property
    def holds(self) -> bool:
        """Whether a pod-template change waits for idle replicas (force skips the wait)."""
        return self.wait_for_idle and not self.force


@dataclass(frozen=True)
class PodFields:
    command: tuple[str, ...] = ()
    container_port: int | None = None
    bind_address: str | None = None  # None: the CRD's default, our usual host flag
    probes: dict[str, Obj] = field(default_factory=dict)  # kind -> corev1.Probe
    skip_model_init: bool = False
    extra_volumes: tuple[Obj, ...] = ()
    extra_volume_mounts: tuple[Obj, ...] = ()
    pod_security_context: Obj | None = None
    security_context: Obj | None = None
    revision_history_limit: int | None = None
    # LLMKube protects startup when `disruption` is unset.
    disruption: Disruption = field(default_factory=Disruption)
    max_pod_lifetime_seconds: int | None = None
    # How long recycling waits for an expired pod to go idle (rolloutPolicy.waitForIdle);
    # None: as long as it takes, 0: not at all.
    max_pod_lifetime_idle_timeout_seconds: int | None = None
    rollout: RolloutPolicy = field(default_factory=RolloutPolicy)
    rope_scaling: RopeScaling | None = None
    speculative: Speculative | None = None


def _bind_address(value: str | None, errors: list[str]) -> str | None:
    if value is None or value == DEFAULT_BIND_ADDRESS:
        return None
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        errors.append(f"spec.bindAddress: {value!r} is not an IP address (e.g. 0.0.0.0 or ::)")
        return None
    if address.is_loopback:
        errors.append(
            f"spec.bindAddress: {value!r} is a loopback address: the kubelet's probes and "
            "the Service reach the pod on its own IP, so the pod would never be Ready "
            "(use 0.0.0.0, :: or the pod's address)"
        )
        return None
    return value


def _probes(raw: Obj | None, errors: list[str]) -> dict[str, Obj]:
    probes: dict[str, Obj] = {}
    for kind in PROBE_KINDS:
        probe = (raw or {}).get(kind)
        if probe is None:
            continue
        path = f"spec.probeOverrides.{kind}"
        if not isinstance(probe, dict):
            errors.append(f"{path}: must be an object (corev1.Probe)")
            continue
        handlers = [h for h in PROBE_HANDLERS if probe.get(h) is not None]
        if len(handlers) != 1:
            errors.append(
                f"{path}: needs exactly one handler of {', '.join(PROBE_HANDLERS)}, "
                f"got {len(handlers)}"
            )
            continue
        probes[kind] = probe
    return probes


def _volumes(data: Obj, skip_model_init: bool, errors: list[str]) -> tuple[Obj, ...]:
    volumes = data.get("extraVolumes") or []
    names: set[str] = set() if skip_model_init else {MODEL_VOLUME}
    for i, volume in enumerate(volumes):
        path = f"spec.extraVolumes[{i}]"
        name = volume.get("name") if isinstance(volume, dict) else None
        if not isinstance(name, str) or not name:
            errors.append(f"{path}.name: required")
        elif name in names:
            taken = "the model's volume" if name == MODEL_VOLUME else "another volume"
            errors.append(f"{path}.name: {name!r} is already {taken}")
        else:
            names.add(name)
    return tuple(volumes)


def _mounts(data: Obj, skip_model_init: bool, errors: list[str]) -> tuple[Obj, ...]:
    mounts = data.get("extraVolumeMounts") or []
    volumes = {v.get("name") for v in data.get("extraVolumes") or [] if isinstance(v, dict)}
    if not skip_model_init:
        volumes.add(MODEL_VOLUME)
    paths: set[str] = set() if skip_model_init else {MODEL_MOUNT}
    for i, mount in enumerate(mounts):
        path = f"spec.extraVolumeMounts[{i}]"
        if not isinstance(mount, dict):
            errors.append(f"{path}: must be an object (corev1.VolumeMount)")
            continue
        name, mount_path = mount.get("name"), mount.get("mountPath")
        if not name:
            errors.append(f"{path}.name: required")
        elif name not in volumes:
            errors.append(f"{path}.name: no volume {name!r} in spec.extraVolumes")
        if not isinstance(mount_path, str) or not mount_path:
            errors.append(f"{path}.mountPath: required")
        elif mount_path in paths:
            what = (
                "where the model is loaded (set skipModelInit to bring your own)"
                if mount_path == MODEL_MOUNT
                else "mounted twice"
            )
            errors.append(f"{path}.mountPath: {mount_path} is {what}")
        else:
            paths.add(mount_path)
    return tuple(mounts)


def _rope(raw: Obj | None, errors: list[str]) -> RopeScaling | None:
    if not raw or not raw.get("type"):
        return None  # LLMKube emits nothing without a type
    if raw["type"] not in LLAMACPP_ROPE_TYPES:
        errors.append(
            f"spec.ropeScaling.type: {raw['type']!r} is not a --rope-scaling value of llama.cpp "
            f"b10068 ({', '.join(LLAMACPP_ROPE_TYPES)})"
        )
        return None
    factor = raw.get("factor")
    if factor is not None and not _ROPE_FACTOR.fullmatch(factor):
        errors.append(f'spec.ropeScaling.factor: {factor!r} is not a decimal number such as "2.0"')
        return None
    if factor is not None and float(factor) == 0:
        errors.append("spec.ropeScaling.factor: must be above 0 (llama.cpp's --rope-scale)")
        return None
    return RopeScaling(raw["type"], factor, raw.get("originalContext"))


def _speculative(raw: Obj | None, errors: list[str]) -> Speculative | None:
    if not raw:
        return None
    path = "spec.speculativeDecoding"
    kind = raw.get("type")
    if not kind:
        errors.append(f"{path}.type: required")
        return None
    if kind in SPEC_TYPES_OFF:
        return None
    kind = SPEC_TYPE_ALIASES.get(kind, kind)
    if kind not in SPEC_TYPES:
        allowed = ", ".join((*SPEC_TYPES_OFF, *SPEC_TYPE_ALIASES, *SPEC_TYPES))
        errors.append(f"{path}.type: {raw['type']!r} is not one of {allowed}")
        return None
    # LLMKube's CEL rules on draft weights (another Model, or a file of Model.files).
    ref, file = raw.get("draftModelRef"), raw.get("draftModel")
    if ref and file:
        errors.append(f"{path}: set only one of draftModelRef and draftModel")
    if kind in DRAFT_WEIGHTS and not (ref or file):
        errors.append(f"{path}.type: {kind} needs draft weights: set draftModelRef or draftModel")
    if (ref or file) and kind not in (*DRAFT_WEIGHTS, "draft-mtp"):
        errors.append(f"{path}: {kind} needs no draft weights (drop draftModelRef/draftModel)")
    return Speculative(kind, raw.get("nDraftMax"), raw.get("pMin"), ref or file or None)


def _bounded(seconds: int | None) -> int | None:
    return None if seconds is None else min(max(seconds, 0), MAX_SECONDS)


def _rollout(raw: Obj | None) -> RolloutPolicy:
    if not raw:
        return RolloutPolicy()
    timeout = _bounded(raw.get("idleTimeoutSeconds")) or DEFAULT_IDLE_TIMEOUT
    return RolloutPolicy(bool(raw.get("waitForIdle")), timeout, bool(raw.get("force")))


def parse_pod_fields(data: Obj) -> tuple[PodFields, list[str]]:
    """The typed fields and the errors, by field path; data is the spec after schema
    validation (types and bounds already checked)."""
    errors: list[str] = []
    skip = bool(data.get("skipModelInit"))
    lifetime = data.get("maxPodLifetimeSeconds")
    if lifetime is not None and lifetime < 1:
        errors.append(
            "spec.maxPodLifetimeSeconds: must be at least 1 (0 would recycle every pod "
            "as soon as it is ready)"
        )
    disruption = data.get("disruption")
    if lifetime is not None and (disruption or {}).get("protectAlways"):
        errors.append(
            "spec.maxPodLifetimeSeconds: pods cannot be recycled while "
            "spec.disruption.protectAlways keeps them from eviction (drop one of them)"
        )
    fields = PodFields(
        command=tuple(data.get("command") or ()),
        container_port=data.get("containerPort"),
        bind_address=_bind_address(data.get("bindAddress"), errors),
        probes=_probes(data.get("probeOverrides"), errors),
        skip_model_init=skip,
        extra_volumes=_volumes(data, skip, errors),
        extra_volume_mounts=_mounts(data, skip, errors),
        pod_security_context=data.get("podSecurityContext"),
        security_context=data.get("securityContext"),
        revision_history_limit=data.get("revisionHistoryLimit"),
        disruption=(
            Disruption(
                disruption.get("protectStartup", True), bool(disruption.get("protectAlways"))
            )
            if disruption is not None
            else Disruption()
        ),
        max_pod_lifetime_seconds=lifetime,
        max_pod_lifetime_idle_timeout_seconds=_bounded(
            data.get("maxPodLifetimeIdleTimeoutSeconds")
        ),
        rollout=_rollout(data.get("rolloutPolicy")),
        rope_scaling=_rope(data.get("ropeScaling"), errors),
        speculative=_speculative(data.get("speculativeDecoding"), errors),
    )
    return fields, errors
