"""What every reconciler is given: the API client, the informer cache, Events, status."""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.cache import Cache
from controller.events import EventRecorder
from controller.kube import KubeClient

from .model_cache_settings import CacheSettings
from .pod_security import DEFAULT_FS_GROUP
from .status import StatusWriter


@dataclass
class Context:
    client: KubeClient
    cache: Cache
    recorder: EventRecorder
    status: StatusWriter
    # --allowed-host-path-roots: where file:// and absolute-path Model sources may be
    # mounted from; empty (the default) refuses them all.
    allowed_host_path_roots: tuple[str, ...] = field(default=())
    # --model-cache-*: the cache PVC loaders fill (reconcilers/model_cache.py).
    model_cache: CacheSettings = field(default_factory=CacheSettings)
    # --allow-any-extra-volume-host-path: hostPath volumes in extraVolumes anywhere
    # (default: only under allowed_host_path_roots, api/volumes.py).
    allow_any_extra_volume_host_path: bool = False
    # --default-fsgroup: the fsGroup of pods whose podSecurityContext sets none (0: none).
    default_fs_group: int = DEFAULT_FS_GROUP

    @classmethod
    def create(
        cls,
        client: KubeClient,
        cache: Cache,
        recorder: EventRecorder | None = None,
        allowed_host_path_roots: tuple[str, ...] = (),
        model_cache: CacheSettings | None = None,
        allow_any_extra_volume_host_path: bool = False,
        default_fs_group: int = DEFAULT_FS_GROUP,
    ) -> Context:
        recorder = recorder or EventRecorder(client)
        return cls(
            client,
            cache,
            recorder,
            StatusWriter(client, recorder),
            allowed_host_path_roots,
            model_cache or CacheSettings(),
            allow_any_extra_volume_host_path=allow_any_extra_volume_host_path,
            default_fs_group=default_fs_group,
        )
