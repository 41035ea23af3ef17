"""One InferenceService's decisions, handed whole to the workload builders (cluster-api's
`scope`): the service, its Model, where the model comes from (placement) and the runtime
command decided for them, and the operator's settings that shape the pods. The builders
(workload.py) read it and decide nothing again.

The plan decides placement and command once per reconcile (plan.py, through `decide`);
`scope_for` makes the same decisions for a caller without a plan (a test, a script).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from api import InferenceServiceSpec, ModelSpec
from api.source import HF_ENDPOINT
from objtypes import Obj
from reconcilers.pod_security import DEFAULT_FS_GROUP
from reconcilers.sources.loader import EPHEMERAL, WeightsVolume
from reconcilers.sources.placement import Placement, model_placement
from runtimes.command import RuntimeCommand, runtime_command
from runtimes.images import NO_OVERRIDES, Overrides


@dataclass(frozen=True)
class Scope:
    isvc: Obj
    service: InferenceServiceSpec
    model: ModelSpec
    placement: Placement  # the runtime's model argument, its volumes, the loader
    command: RuntimeCommand  # the pods' runtime command (multiNode: rank 0's shape)
    claimed: int | None = None  # devices per pod the claims give, when known
    fs_group: int = DEFAULT_FS_GROUP  # --default-fsgroup
    restricted: bool = False  # the namespace enforces Pod Security `restricted`
    hub: str = HF_ENDPOINT  # --hf-endpoint
    images: Overrides = field(default_factory=lambda: NO_OVERRIDES)  # chart runtimeImages

    @property
    def name(self) -> str:
        return str(self.isvc["metadata"]["name"])


def decide(
    service: InferenceServiceSpec,
    model: ModelSpec,
    claimed: int | None,
    roots: tuple[str, ...],
    store: WeightsVolume,
    hub: str,
    images: Overrides,
) -> tuple[Placement, RuntimeCommand]:
    """Where the model comes from and the runtime command that loads it; raises
    SourceNotAllowed for a host path outside `roots` (--allowed-host-path-roots)."""
    placement = model_placement(model, service.runtime, roots, store, service.hf_token, hub)
    command = runtime_command(
        service,
        model,
        placement.arg,
        service.model_ref,
        claimed,
        mmproj=placement.mmproj,
        images=images,
    )
    return placement, command


def scope_for(
    isvc: Obj,
    service: InferenceServiceSpec,
    model: ModelSpec,
    claimed: int | None = None,
    *,
    roots: tuple[str, ...] = (),
    store: WeightsVolume = EPHEMERAL,
    fs_group: int = DEFAULT_FS_GROUP,
    restricted: bool = False,
    hub: str = HF_ENDPOINT,
    images: Overrides = NO_OVERRIDES,
) -> Scope:
    """The scope a reconcile would hand the builders for these specs and settings."""
    placement, command = decide(service, model, claimed, roots, store, hub, images)
    return Scope(
        isvc, service, model, placement, command, claimed, fs_group, restricted, hub, images
    )
