"""A real Kubernetes node beside the control plane: containerd, runc, the CNI bridge,
kube-proxy, a kubelet and the DRA example driver's kubelet plugin, each a process of its
own, stopped by its PID.

Containers really run here: the kubelet starts pods through containerd's CRI and runc,
waits for the DRA plugin to prepare their claims, and containerd hands the prepared
devices to the containers through CDI. Images come from devcluster/images (tars imported
into containerd under the names the pods use, so nothing is pulled). Everything lives in
the network namespace of devcluster/netns.py and under one folder of its own: containerd's
root and state, runc's state, the kubelet's root, pod logs, the CNI and CDI folders, the
kubelet's cgroups (under a cgroup root named after the node, in every v1 hierarchy).
`stop()` removes the pods, stops every process, kills what a shim left, unmounts what is
mounted below the folder, removes the cgroups and puts back the host sysctls the kubelet
writes at start. The facts this follows are in docs/testing.md ("The node tier").
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .cluster import SERVICE_CIDR, ClusterError, KubeCluster
from .cluster import binaries_dir as kube_binaries_dir
from .cluster import missing_binaries as missing_kube_binaries
from .netns import NetworkNamespace
from .pki import kubeconfig
from .process import Component, ComponentExited, script_path, wait_while_running

ROOT = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = ROOT / "scripts" / "build-node.sh"
NODE_NAME = "llmkube-node-0"
# The node's address, on its own network namespace's veth (nothing routes out of it).
NODE_IP = "10.250.0.2"
POD_CIDR = "10.244.0.0/24"
CLUSTER_DOMAIN = "cluster.local"
CLUSTER_CIDR = "10.244.0.0/16"
SANDBOX_IMAGE = "registry.k8s.io/pause:3.10"
# The DRA example driver's name, and the DeviceClass that lets the seed guide's manifests
# (deviceClassName: gpu.nvidia.com) apply unchanged to its devices.
EXAMPLE_DRIVER = "gpu.example.com"
DEVICE_CLASS = "gpu.nvidia.com"
DEFAULT_DEVICES = 4
# Written by the kubelet at start (it sets them once); put back right after, as they are
# the host's (not namespaced).
KUBELET_SYSCTLS = ("vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops")
CGROUP_ROOT = Path("/sys/fs/cgroup")
START_TIMEOUT = 120.0
# In a node cluster's folder: its owner's pid and network namespace (sweep_stale).
OWNER_FILE = "owner.json"
BINARIES = (
    "containerd",
    "containerd-shim-runc-v2",
    "ctr",
    "runc",
    "crictl",
    "kubelet",
    "kube-proxy",
    "kubectl",
    "dra-example-kubeletplugin",
    "helm",
    "buildkitd",
    "buildctl",
    "coredns",
    "prometheus",
    "cni/bridge",
    "cni/host-local",
    "cni/loopback",
    "cni/portmap",
)


def binaries_dir() -> Path:
    """Where scripts/build-node.sh keeps (or would keep) the node's binaries."""
    return script_path(BUILD_SCRIPT)


def images_dir() -> Path:
    """Where devcluster/images keeps the image tars the node imports."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "llmkube-py" / "node-images"


def missing_binaries(bin_dir: Path) -> list[str]:
    return [b for b in BINARIES if not os.access(bin_dir / b, os.X_OK)]


def preflight() -> list[str]:
    """What this machine lacks for a real node (empty: it can run one)."""
    lacks = []
    if os.geteuid() != 0:
        lacks.append("root (containerd, runc and the kubelet need it)")
    for tool in ("ip", "iptables", "iptables-restore", "mount", "umount"):
        if shutil.which(tool) is None:
            lacks.append(f"{tool} on PATH")
    if not (CGROUP_ROOT / "memory").is_dir():
        lacks.append("cgroup v1 hierarchies under /sys/fs/cgroup (the kubelet runs cgroupfs)")
    return lacks


@dataclass
class RealNode:
    """One node named NODE_NAME, at the control plane's address, with `devices` example
    GPUs published by the DRA plugin."""

    cluster: KubeCluster
    bin: Path
    dir: Path
    images: list[Path]
    devices: int = DEFAULT_DEVICES
    name: str = NODE_NAME
    components: dict[str, Component] = field(default_factory=dict)
    _sysctls: dict[str, str] = field(default_factory=dict)
    # The pods' network namespaces (CNI's, /run/netns/cni-*) there before this node.
    _pod_netns_before: set[str] = field(default_factory=set)

    # -- paths ---------------------------------------------------------------------------

    @property
    def address(self) -> str:
        return self.cluster.address

    @property
    def socket(self) -> Path:
        return self.dir / "containerd" / "containerd.sock"

    @property
    def kubelet_root(self) -> Path:
        return self.dir / "kubelet"

    @property
    def cdi_dir(self) -> Path:
        return self.dir / "cdi"

    @property
    def cgroup_parent(self) -> str:
        return f"/{self.name}"

    def env(self) -> dict[str, str]:
        """PATH with the node's binaries first: containerd finds its shim there, the
        shim its runc."""
        env = dict(os.environ)
        env["PATH"] = f"{self.bin}:{env.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
        return env

    # -- configuration ---------------------------------------------------------------------

    def _containerd_config(self) -> Path:
        d = self.dir / "containerd"
        cni_conf = self.dir / "cni" / "net.d"
        cni_conf.mkdir(parents=True, exist_ok=True)
        (cni_conf / "10-llmkube.conflist").write_text(json.dumps(self._cni_conflist(), indent=1))
        runtime = 'plugins."io.containerd.cri.v1.runtime"'
        images = 'plugins."io.containerd.cri.v1.images"'
        runc = f"{runtime}.containerd.runtimes.runc"
        text = f"""version = 3
root = "{d / "root"}"
state = "{d / "state"}"

[grpc]
  address = "{self.socket}"

[ttrpc]
  address = "{d / "containerd.sock.ttrpc"}"

[{images}]
  snapshotter = "overlayfs"

[{images}.pinned_images]
  sandbox = "{SANDBOX_IMAGE}"

[{runtime}]
  enable_cdi = true
  cdi_spec_dirs = ["{self.cdi_dir}"]
  # The CRI gives sandboxes oom_score_adj -998; root here lacks CAP_SYS_RESOURCE.
  restrict_oom_score_adj = true

[{runtime}.containerd]
  default_runtime_name = "runc"

[{runc}]
  runtime_type = "io.containerd.runc.v2"

[{runc}.options]
  BinaryName = "{self.bin / "runc"}"
  Root = "{d / "runc"}"
  SystemdCgroup = false

[{runtime}.cni]
  bin_dirs = ["{self.bin / "cni"}"]
  conf_dir = "{cni_conf}"
"""
        path = d / "config.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def _cni_conflist(self) -> dict[str, Any]:
        return {
            "cniVersion": "1.0.0",
            "name": "llmkube-node",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": "cni0",
                    "isGateway": True,
                    "ipMasq": False,  # nothing leaves the namespace
                    "hairpinMode": True,  # a pod reaching itself through its Service
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_CIDR}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(self.dir / "cni" / "ipam"),
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        }

    def _kubelet_config(self) -> Path:
        # The node's own resolver: nothing outside to ask. Pods ask the cluster DNS.
        resolv = self.dir / "resolv.conf"
        resolv.write_text("options ndots:1\n")
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": self.address,
            "readOnlyPort": 0,
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "imageServiceEndpoint": f"unix://{self.socket}",
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.cgroup_parent,
            "failSwapOn": False,
            "failCgroupV1": False,
            # Root here may not lower oom_score_adj below its own (no CAP_SYS_RESOURCE).
            "oomScoreAdj": 0,
            "protectKernelDefaults": False,
            "resolvConf": str(resolv),
            "clusterDNS": [self.address],
            "clusterDomain": CLUSTER_DOMAIN,
            "podLogsDir": str(self.dir / "pod-logs"),
            "podCIDR": POD_CIDR,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(self.cluster.pki.ca)},
            },
            "authorization": {"mode": "Webhook"},
            # A busy shared disk must not make the node evict the tests' pods.
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "nodefs.inodesFree": "1%",
                "imagefs.available": "1%",
            },
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False,
            "shutdownGracePeriod": "0s",
            "maxPods": 50,
        }
        path = self.dir / "kubelet-config.yaml"
        path.write_text(yaml.safe_dump(config))
        return path

    def _kubelet_kubeconfig(self) -> Path:
        crt, key = self.cluster.pki.issue(
            f"kubelet-{self.name}", f"system:node:{self.name}", org="system:nodes"
        )
        return kubeconfig(
            self.dir / "kubelet.kubeconfig",
            self.cluster.url,
            self.cluster.pki.ca,
            user=f"system:node:{self.name}",
            cert=crt,
            key=key,
        )

    # -- components --------------------------------------------------------------------------

    def _component(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        c = Component(name, argv, self.dir / f"{name}.log", env=env or self.env())
        self.components[name] = c
        self.cluster.components[name] = c  # its log joins the cluster's in a failure
        c.start()

    def _wait(self, what: str, ready: Callable[[], bool], *owners: str) -> None:
        components = {o: self.components[o] for o in owners}
        try:
            wait_while_running(what, ready, components, START_TIMEOUT, tail=40)
        except ComponentExited as e:
            raise ClusterError(str(e)) from None

    def ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / "ctr"), f"--address={self.socket}", "--namespace=k8s.io", *args],
            capture_output=True,
            text=True,
            check=check,
            timeout=300,
        )

    def crictl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                str(self.bin / "crictl"),
                f"--runtime-endpoint=unix://{self.socket}",
                f"--image-endpoint=unix://{self.socket}",
                "--timeout=60s",
                *args,
            ],
            capture_output=True,
            text=True,
            check=check,
            timeout=300,
        )

    def _containerd_ready(self) -> bool:
        return self.socket.exists() and self.ctr("version", check=False).returncode == 0

    def _import_images(self) -> None:
        for tar in self.images:
            done = self.ctr("images", "import", "--no-unpack", str(tar), check=False)
            if done.returncode != 0:
                raise ClusterError(f"ctr images import {tar}: {done.stderr.strip()}")

    def image_names(self) -> set[str]:
        out = self.ctr("images", "list", "--quiet").stdout
        return {line.strip() for line in out.splitlines() if line.strip()}

    def _kube_proxy(self) -> None:
        self._component(
            "kube-proxy",
            [
                str(self.bin / "kube-proxy"),
                f"--kubeconfig={self.cluster.admin_kubeconfig}",
                f"--hostname-override={self.name}",
                f"--bind-address={self.address}",
                "--proxy-mode=iptables",
                f"--cluster-cidr={CLUSTER_CIDR}",
                # Pods on one bridge without br_netfilter: the answer to a pod that reached
                # another through a Service IP must come back through the NAT.
                "--masquerade-all",
                "--conntrack-max-per-core=0",  # nf_conntrack_max is not ours to set here
                "--conntrack-tcp-timeout-established=0",
                "--conntrack-tcp-timeout-close-wait=0",
                "--metrics-bind-address=127.0.0.1:10249",
                "--healthz-bind-address=127.0.0.1:10256",
                "--v=1",
            ],
        )

    def _coredns(self) -> None:
        """CoreDNS with its kubernetes plugin on the node's address: Services and pods
        by name, as on every real cluster (no forwarder: nothing outside to ask)."""
        corefile = self.dir / "Corefile"
        corefile.write_text(
            f""".:53 {{
    bind {self.address}
    errors
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {self.cluster.admin_kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
}}
"""
        )
        self._component("coredns", [str(self.bin / "coredns"), "-conf", str(corefile)])

    def _kubelet(self) -> None:
        for d in ("cert", "volume-plugins", "pod-logs"):
            (self.dir / d).mkdir(parents=True, exist_ok=True)
        self.kubelet_root.mkdir(parents=True, exist_ok=True)
        self._cgroups_create()
        self._sysctls = {k: _read_sysctl(k) for k in KUBELET_SYSCTLS}
        self._component(
            "kubelet",
            [
                str(self.bin / "kubelet"),
                f"--config={self._kubelet_config()}",
                f"--kubeconfig={self._kubelet_kubeconfig()}",
                f"--hostname-override={self.name}",
                f"--node-ip={self.address}",
                f"--cert-dir={self.dir / 'cert'}",
                f"--root-dir={self.kubelet_root}",
                f"--volume-plugin-dir={self.dir / 'volume-plugins'}",
                "--v=1",
            ],
        )

    def _dra_plugin(self) -> None:
        self.cdi_dir.mkdir(parents=True, exist_ok=True)
        env = self.env()
        env.update(
            {
                "NODE_NAME": self.name,
                "NAMESPACE": "kube-system",
                "NUM_DEVICES": str(self.devices),
                "CDI_ROOT": str(self.cdi_dir),
                "KUBELET_REGISTRAR_DIRECTORY_PATH": str(self.kubelet_root / "plugins_registry"),
                "KUBELET_PLUGINS_DIRECTORY_PATH": str(self.kubelet_root / "plugins"),
            }
        )
        self._component(
            "dra-example-kubeletplugin",
            [
                str(self.bin / "dra-example-kubeletplugin"),
                f"--kubeconfig={self.cluster.admin_kubeconfig}",
            ],
            env=env,
        )

    def device_class(self) -> dict[str, Any]:
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": DEVICE_CLASS},
            "spec": {
                "selectors": [{"cel": {"expression": f"device.driver == '{EXAMPLE_DRIVER}'"}}]
            },
        }

    # -- readiness ---------------------------------------------------------------------------

    def node(self) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.cluster.http("GET", f"/api/v1/nodes/{self.name}")
        except (urllib.error.URLError, OSError):
            return None
        return found

    def _ready(self) -> bool:
        node = self.node() or {}
        return any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (node.get("status") or {}).get("conditions") or []
        )

    def slices(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.cluster.http(
            "GET", "/apis/resource.k8s.io/v1/resourceslices"
        )["items"]
        return [s for s in items if s["spec"].get("nodeName") == self.name]

    def _published(self) -> bool:
        try:
            return sum(len(s["spec"].get("devices") or []) for s in self.slices()) >= self.devices
        except (urllib.error.URLError, OSError):
            return False

    # -- the whole -----------------------------------------------------------------------------

    def start(self) -> RealNode:
        self.dir.mkdir(parents=True, exist_ok=True)
        self._pod_netns_before = _pod_netns()
        try:
            config = self._containerd_config()
            self._component("containerd", [str(self.bin / "containerd"), f"--config={config}"])
            self._wait("containerd", self._containerd_ready, "containerd")
            self._import_images()
            self._kube_proxy()
            self._coredns()
            self._kubelet()
            self._wait(f"node {self.name} Ready", self._ready, "kubelet")
            self._restore_sysctls()
            self.cluster.apply(self.device_class(), manager="devcluster")
            self._dra_plugin()
            self._wait(
                "the DRA plugin's ResourceSlice", self._published, "dra-example-kubeletplugin"
            )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Everything removed, whatever state the node is in."""
        if "containerd" in self.components and self.components["containerd"].running():
            # Every pod's containers stopped and its network torn down through the CRI.
            self.crictl("rmp", "--all", "--force", check=False)
        for name in ("dra-example-kubeletplugin", "kubelet", "coredns", "kube-proxy", "containerd"):
            c = self.components.get(name)
            if c is not None:
                c.stop()
        self._kill_leftovers()
        self._unmount_below(self.dir)
        # A sandbox removed while its pod was still stopping can leave CNI's namespace.
        for name in _pod_netns() - self._pod_netns_before:
            subprocess.run(["ip", "netns", "delete", name], capture_output=True, check=False)
        self._cgroups_remove()
        self._restore_sysctls()

    def _restore_sysctls(self) -> None:
        for key, value in self._sysctls.items():
            try:
                if _read_sysctl(key) != value:
                    (Path("/proc/sys") / key).write_text(value)
            except OSError:
                pass

    # -- leftovers -------------------------------------------------------------------------------

    def _kill_leftovers(self) -> None:
        """Shims (they outlive containerd by design) and whatever still runs in the
        node's cgroups."""
        marker = str(self.dir)
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "containerd-shim" in cmdline and marker in cmdline:
                _kill(int(proc.name))
        self._kill_leftovers_in_cgroups()

    def _kill_leftovers_in_cgroups(self) -> None:
        for _ in range(50):
            pids = self._cgroup_pids()
            if not pids:
                break
            for pid in pids:
                _kill(pid)
            time.sleep(0.1)

    def _hierarchies(self) -> list[Path]:
        return [h for h in sorted(CGROUP_ROOT.iterdir()) if h.is_dir() and not h.is_symlink()]

    def _cgroups_create(self) -> None:
        for h in self._hierarchies():
            (h / self.name).mkdir(exist_ok=True)

    def _cgroup_pids(self) -> set[int]:
        pids: set[int] = set()
        for h in self._hierarchies():
            top = h / self.name
            if not top.is_dir():
                continue
            for procs in top.rglob("cgroup.procs"):
                try:
                    pids.update(int(p) for p in procs.read_text().split())
                except OSError:
                    continue
        return pids

    def _cgroups_remove(self) -> None:
        for h in self._hierarchies():
            top = h / self.name
            if not top.is_dir():
                continue
            folders = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
            for folder in [*folders, top]:
                with contextlib.suppress(OSError):
                    folder.rmdir()

    @staticmethod
    def _unmount_below(prefix: Path) -> None:
        """Lazily unmount every mount point below `prefix`, deepest first (overlay
        rootfs, the kubelet's volumes and its root's bind mount, shm, netns handles)."""
        base = str(prefix.resolve())
        points = []
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].encode().decode("unicode_escape")
            if point == base or point.startswith(base + "/"):
                points.append(point)
        for point in sorted(set(points), key=len, reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)


@dataclass
class NodeCluster:
    """The control plane and the real node, both inside `netns`, which this process has
    entered; `stop()` stops both, leaves and deletes the namespace."""

    netns: NetworkNamespace
    cluster: KubeCluster
    node: RealNode

    def stop(self) -> None:
        try:
            self.node.stop()
            self.cluster.stop()
        finally:
            self.netns.delete()


def missing(kube_bin: Path, node_bin: Path) -> list[str]:
    """What is not built, or what this machine lacks, for a real node (empty: none)."""
    lacks = [f"{b} in {kube_bin}" for b in missing_kube_binaries(kube_bin)]
    lacks += [f"{b} in {node_bin}" for b in missing_binaries(node_bin)]
    return lacks + preflight()


def start_node_cluster(
    workdir: Path, images: list[Path], *, devices: int = DEFAULT_DEVICES
) -> NodeCluster:
    """Make a network namespace, enter it, start the control plane at NODE_IP and the
    real node. On any failure everything started is stopped and the namespace removed."""
    kube_bin, node_bin = kube_binaries_dir(), binaries_dir()
    lacks = missing(kube_bin, node_bin)
    if lacks:
        raise ClusterError("a real node needs: " + "; ".join(lacks))
    sweep_stale(workdir.parent)
    netns = NetworkNamespace(f"llmkube-{os.urandom(3).hex()}", NODE_IP)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / OWNER_FILE).write_text(json.dumps({"pid": os.getpid(), "netns": netns.name}))
    netns.create()
    cluster: KubeCluster | None = None
    try:
        netns.enter()
        cluster = KubeCluster(kube_bin, workdir / "kube", nodes=0, address=NODE_IP).start()
        node = RealNode(cluster, node_bin, workdir / "node", images, devices=devices).start()
    except BaseException:
        if cluster is not None:
            cluster.stop()
        netns.delete()
        raise
    return NodeCluster(netns, cluster, node)


def _pod_netns() -> set[str]:
    run = Path("/run/netns")
    return {p.name for p in run.glob("cni-*")} if run.is_dir() else set()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(parent: Path) -> list[Path]:
    """Remove what a node cluster left when its owner was killed before it could stop
    (SIGKILL, a lost session): below `parent`, each folder with an OWNER_FILE whose
    process is gone has its processes killed (those naming the folder in their argv,
    shims included), its mounts unmounted, its network namespace removed, and is deleted;
    while no live node cluster remains, what remains in the node's cgroups is killed and
    the cgroups and the pods' CNI namespaces are removed.
    Returns the folders swept."""
    stale, live = [], False
    for owner in sorted(parent.glob(f"*/{OWNER_FILE}")):
        try:
            info = json.loads(owner.read_text())
        except (OSError, ValueError):
            continue
        if _alive(int(info.get("pid", 0))):
            live = True
            continue
        stale.append(owner.parent)
    if not stale:
        return []
    for workdir in stale:
        marker = str(workdir)
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline:
                _kill(int(proc.name))
    for workdir in stale:
        RealNode._unmount_below(workdir)
    # The node's cgroups and the pods' CNI namespaces are named alike for every node
    # cluster: removed only while no live one may own them.
    if not live:
        leftover = RealNode.__new__(RealNode)
        leftover.name = NODE_NAME
        leftover._kill_leftovers_in_cgroups()
        leftover._cgroups_remove()
        cni = Path("/run/netns")
        for netns in cni.glob("cni-*") if cni.is_dir() else []:
            subprocess.run(["ip", "netns", "delete", netns.name], capture_output=True, check=False)
    for workdir in stale:
        info = json.loads((workdir / OWNER_FILE).read_text())
        subprocess.run(["ip", "netns", "delete", info["netns"]], capture_output=True, check=False)
        shutil.rmtree(workdir, ignore_errors=True)
    return stale


def _read_sysctl(key: str) -> str:
    return (Path("/proc/sys") / key).read_text().strip()


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


__all__ = [
    "NODE_IP",
    "SERVICE_CIDR",
    "NodeCluster",
    "RealNode",
    "binaries_dir",
    "missing",
    "missing_binaries",
    "preflight",
    "start_node_cluster",
]
