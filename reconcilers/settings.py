"""The operator's settings: the controller's flags (chart values) the reconcilers read."""

from __future__ import annotations

from dataclasses import dataclass, field

from reconcilers.devices.kueue import KueueSettings

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
    # --kueue-device-class-mappings: DeviceClass -> Kueue resource name.
    kueue: KueueSettings = field(default_factory=KueueSettings)
