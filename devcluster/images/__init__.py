"""The node tier's container images, built without a registry (build.py says which)."""

from .build import build_images
from .rootfs import ImageBuildError

__all__ = ["ImageBuildError", "build_images"]
