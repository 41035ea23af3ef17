"""The real Kubernetes control plane for development: the cluster test tier, the demo and
the bench run on it. Built from Go modules by scripts/build-kube.sh; not in the product
wheel."""

from .cluster import (
    ClusterError,
    KubeCluster,
    binaries_dir,
    binaries_version,
    missing_binaries,
    start_cluster,
)
from .objects import CLUSTER_SCOPED, object_path
from .pki import Pki, kubeconfig
from .process import Component, free_port

__all__ = [
    "CLUSTER_SCOPED",
    "ClusterError",
    "Component",
    "KubeCluster",
    "Pki",
    "binaries_dir",
    "binaries_version",
    "free_port",
    "kubeconfig",
    "missing_binaries",
    "object_path",
    "start_cluster",
]
