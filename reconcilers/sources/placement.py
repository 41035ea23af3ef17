"""Where the runtime finds the Model: the argument it is given, and the volumes behind it.

One function, model_placement, decides the model argument for every source scheme (the
runtime's flag or positional spelling is decided in runtimes/command.py):

- a hub repo (hf://org/repo[@rev], org/repo): the repo id; the runtime downloads it;
- pvc://claim/path: the claim mounted read-only at /model-source, the path inside it;
- a host path (file:///path, /path): a read-only hostPath volume at the same path, only
  under one of the operator's --allowed-host-path-roots (a refusal otherwise, even when
  a caller skipped the reconcile-time check: no unchecked hostPath is ever built);
- one file to download (http(s), hf://org/repo/file, s3://): the loader's path in /models.

The /models emptyDir is there only for the loader to write to: without a loader it is
left out, so that it never hides a source at or under /models (or one in the image).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from api import InferenceServiceSpec, ModelSpec
from api.source import HF_ENDPOINT, host_path_error
from objtypes import Obj
from reconcilers.sources.loader import EPHEMERAL, MODEL_DIR, WeightsVolume, loader_for
from runtimes.pod_checks import MountedPath

PVC_MOUNT = "/model-source"  # LLMKube's mount point of a pvc:// source


class SourceNotAllowed(ValueError):
    """A host-path source outside the allowed roots; the message names spec.source."""


@dataclass(frozen=True)
class Placement:
    arg: str  # what the runtime loads: a repo id ([:quant] for llama.cpp) or a path
    revision: str | None = None  # the hub revision, for the runtime's --revision
    loader: Obj | None = None  # the init container that downloads the file
    volumes: list[Obj] = field(default_factory=list)
    mounts: list[Obj] = field(default_factory=list)  # the runtime container's mounts
    store: WeightsVolume = EPHEMERAL  # where the loader writes (mounted only with a loader)
    mmproj: str | None = None  # the staged spec.mmproj (llama.cpp's --mmproj)

    @property
    def models_dir(self) -> bool:
        """Whether /models is mounted: only for the loader to write to. An empty /models
        would hide a source at or under it, or one baked into the image."""
        return self.loader is not None


def host_path_type(model: ModelSpec, runtime: str, path: str) -> str:
    """File for a GGUF (what llama.cpp and a GGUF-serving vLLM/SGLang load), else the
    model directory safetensors and pytorch checkpoints are."""
    gguf = model.format == "gguf" or path.endswith(".gguf") or runtime == "llamacpp"
    return "File" if gguf else "Directory"


def model_placement(
    model: ModelSpec,
    runtime: str = "vllm",
    roots: tuple[str, ...] = (),
    store: WeightsVolume = EPHEMERAL,
    hf_token: tuple[str, str] | None = None,
    hub: str = HF_ENDPOINT,
) -> Placement:
    """The model argument and its volumes; raises SourceNotAllowed for a host path outside
    `roots` (the operator's --allowed-host-path-roots). store: where a loader writes;
    hf_token: the service's hfTokenSecretRef (Secret, key); hub: the --hf-endpoint."""
    source = model.location
    loading = loader_for(model, store, runtime, hf_token, hub)
    if loading is not None:  # a one-file source, or spec.files
        return Placement(loading.path, loader=loading.container, store=store, mmproj=loading.mmproj)
    if source.kind == "hub":
        arg = source.repo + (f":{source.quant}" if source.quant else "")
        return Placement(arg, revision=source.revision)
    if source.kind == "pvc":
        volume = {
            "name": "model-source",
            "persistentVolumeClaim": {"claimName": source.claim, "readOnly": True},
        }
        mount = {"name": "model-source", "mountPath": PVC_MOUNT, "readOnly": True}
        return Placement(f"{PVC_MOUNT}/{source.path}", volumes=[volume], mounts=[mount])
    if source.kind == "host":
        refusal = host_path_error(source, roots)
        if refusal:
            raise SourceNotAllowed(refusal)
        volume = {
            "name": "host-model",
            "hostPath": {"path": source.path, "type": host_path_type(model, runtime, source.path)},
        }
        mount = {"name": "host-model", "mountPath": source.path, "readOnly": True}
        return Placement(source.path, volumes=[volume], mounts=[mount])
    raise AssertionError(f"no placement for source kind {source.kind}")


def runtime_mounts(placement: Placement, service: InferenceServiceSpec) -> list[MountedPath]:
    """The runtime container's mounts as the pod gets them: the model source's, the
    loader's /models (an emptyDir holds only what the loader writes), extraVolumeMounts."""
    out = [MountedPath(str(m["mountPath"])) for m in placement.mounts]
    if placement.models_dir:
        staged = tuple(p for p in (placement.arg, placement.mmproj) if p)
        out.append(MountedPath(MODEL_DIR, None if placement.store.claim else staged))
    out += [MountedPath(str(m.get("mountPath") or "")) for m in service.fields.extra_volume_mounts]
    return out
