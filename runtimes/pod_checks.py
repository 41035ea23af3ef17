"""Pod fields that would start a runtime that never serves: refused (InvalidRuntimeConfig)
by runtimes/problems.py with the field named, instead of a crash-looping pod."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from api import InferenceServiceSpec
from runtimes.parsers import resolve
from runtimes.spellings import user_args

# Options whose value is a file or directory the runtime loads at start (the spellings
# each parser resolves to).
PATH_OPTIONS: dict[str, tuple[str, ...]] = {
    "vllm": ("--model",),
    "sglang": ("--model-path", "--model"),
    "tgi": ("--model-id",),
    "llamacpp": ("--model", "-m", "--mmproj", "-mm", "--model-draft", "-md"),
}


@dataclass(frozen=True)
class MountedPath:
    """A mount of the runtime container: its path, and for the emptyDir a loader fills,
    the only paths it holds (None: whatever the volume has)."""

    path: str
    holds: tuple[str, ...] | None = None


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def unmounted_model_paths(
    service: InferenceServiceSpec, mounts: Sequence[MountedPath]
) -> list[str]:
    """Absolute model paths in extraArgs (`-m /models/other.gguf`, `--mmproj ...`) that no
    mount of the runtime container provides: the runtime would exit finding no file. A
    custom spec.image may carry files of its own: not checked there."""
    if service.image:
        return []
    problems = []
    for opt in resolve(service.runtime, service.extra_args):
        value = opt.value
        if opt.option not in PATH_OPTIONS[service.runtime] or not value:
            continue
        if not value.startswith("/"):
            continue
        where = f"spec.extraArgs[{opt.value_index}]: {opt.option} {value!r}"
        covering = [m for m in mounts if _under(value, m.path)]
        if not covering:
            mounted = ", ".join(sorted({m.path for m in mounts})) or "none"
            problems.append(
                f"{where} is on no volume the pod mounts (mounted: {mounted}; add one with "
                "spec.extraVolumes / spec.extraVolumeMounts): the runtime would not find it"
            )
            continue
        deepest = max(covering, key=lambda m: len(m.path))
        if deepest.holds is not None and not any(_under(value, h) for h in deepest.holds):
            problems.append(
                f"{where} is under {deepest.path}, an empty volume that holds only what the "
                f"loader writes ({', '.join(deepest.holds)}): the runtime would not find it"
            )
    return problems


def pod_field_problems(service: InferenceServiceSpec, args: tuple[str, ...]) -> list[str]:
    """args: the runtime's argv as built (extraArgs included)."""
    fields, runtime = service.fields, service.runtime
    problems = []
    if fields.speculative is not None and runtime != "llamacpp":
        problems.append(
            f"spec.speculativeDecoding: only the llamacpp runtime takes it (--spec-type); "
            f"{runtime} has no such flags (set its own options in extraArgs)"
        )
    elif fields.speculative is not None and fields.speculative.draft_weights:
        problems.append(
            "spec.speculativeDecoding: draft weights (draftModelRef / draftModel) are not "
            "staged by llmkube-py yet, and llama.cpp cannot load the draft without them; use "
            "draft-mtp with the weights in the model, or an ngram-* type"
        )
    port = user_args(runtime, args).value("--port")
    if (
        fields.container_port is not None
        and port is not None
        and port != str(fields.container_port)
    ):
        problems.append(
            f"spec.containerPort: {fields.container_port}, but --port {port} in "
            "spec.extraArgs makes the runtime listen elsewhere: the container port, probes "
            "and Service would miss it (drop one of them)"
        )
    return problems
