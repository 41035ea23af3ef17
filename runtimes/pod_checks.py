"""Pod fields that would start a runtime that never serves: refused (InvalidRuntimeConfig)
by runtimes/checks.py with the field named, instead of a crash-looping pod."""

from __future__ import annotations

from api import InferenceServiceSpec
from runtimes.flags import user_args


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
