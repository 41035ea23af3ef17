"""The operator's model cache settings (flags --model-cache-*, chart modelCache.*)."""

from __future__ import annotations

from dataclasses import dataclass

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
