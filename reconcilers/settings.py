"""The operator's settings: the controller's flags (chart values) the reconcilers read."""

from __future__ import annotations

from dataclasses import dataclass, field

from api.source import HF_ENDPOINT
from reconcilers.devices.kueue import KueueSettings
from reconcilers.pod_security import DEFAULT_FS_GROUP
from runtimes.images import NO_OVERRIDES, Overrides

MODES = ("shared", "perService")
ACCESS_MODES = ("ReadWriteOnce", "ReadWriteMany", "ReadWriteOncePod")


@dataclass(frozen=True)
class CacheSettings:
    """The operator's --model-cache-* flags (chart modelCache.*)."""

    enabled: bool = False
    mode: str = "shared"
    size: str = "100Gi"
    storage_class: str | None = None
    access_mode: str = "ReadWriteOnce"


@dataclass(frozen=True)
class Settings:
    """Everything the operator configures, given once to the reconcilers."""

    # --model-cache-*: the cache PVC loaders fill (reconcilers/sources/cache_claim.py).
    model_cache: CacheSettings = field(default_factory=CacheSettings)
    # --allowed-host-path-roots: where file:// and absolute-path Model sources may be
    # mounted from; empty (the default) refuses them all.
    allowed_host_path_roots: tuple[str, ...] = ()
    # --allow-any-extra-volume-host-path: hostPath volumes in extraVolumes anywhere
    # (default: only under allowed_host_path_roots, api/volumes.py).
    allow_any_extra_volume_host_path: bool = False
    # --hf-endpoint (env HF_ENDPOINT): the Hugging Face hub hub sources download from, and
    # the only host the HF token is sent to (a mirror, an air-gapped hub).
    hf_endpoint: str = HF_ENDPOINT
    # --default-fsgroup: the fsGroup of pods whose podSecurityContext sets none (0: none).
    default_fs_group: int = DEFAULT_FS_GROUP
    # --kueue-device-class-mappings: DeviceClass -> Kueue resource name.
    kueue: KueueSettings = field(default_factory=KueueSettings)
    # --managed-dra-claims: make a ResourceClaimTemplate for a GPU Model without claims
    # where the vendor's GPUs are reachable only through DRA (reconcilers/devices/managed.py).
    managed_claims: bool = True
    # --dra-device-class: the DeviceClass those templates ask for (default: the vendor's).
    dra_device_class: str | None = None
    # LLMKUBE_RUNTIME_IMAGES (chart runtimeImages): images over the pins, per runtime and
    # accelerator variant (runtimes/images.py).
    runtime_images: Overrides = field(default_factory=lambda: NO_OVERRIDES)
