"""The runtime flags that come from the pod fields: where the runtime listens
(`containerPort`, `bindAddress`) and llama.cpp's `ropeScaling` and `speculativeDecoding`.

LLMKube's order of precedence holds: a flag the user passes in extraArgs wins (for
ropeScaling, a user `--rope-scaling` drops the whole block, as LLMKube skips it).
"""

from __future__ import annotations

from collections.abc import Container, Iterator

from api import InferenceServiceSpec
from api.podfields import PodFields

ANY_ADDRESS = "0.0.0.0"  # what we bind when bindAddress is the CRD's default


def listen_port(service: InferenceServiceSpec, default: int) -> int:
    """spec.containerPort, else the runtime's own port."""
    return service.fields.container_port or default


def bind_host(service: InferenceServiceSpec) -> str:
    """spec.bindAddress when the user chose one; its default `::` keeps ours."""
    return service.fields.bind_address or ANY_ADDRESS


def llamacpp_field_flags(
    fields: PodFields, user: Container[str]
) -> Iterator[tuple[str, object | None]]:
    """(option, value) pairs for ropeScaling and speculativeDecoding (llama.cpp only)."""
    rope = fields.rope_scaling
    if rope is not None and "--rope-scaling" not in user:
        yield "--rope-scaling", rope.type
        yield "--rope-scale", rope.factor
        yield "--yarn-orig-ctx", rope.original_context
    spec = fields.speculative
    if spec is not None:
        yield "--spec-type", spec.type
        yield "--spec-draft-n-max", spec.n_draft_max
        yield "--spec-draft-p-min", spec.p_min
