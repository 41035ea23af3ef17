"""The real Kubernetes control plane on loopback.

etcd, kube-apiserver (RBAC, TLS, service-account tokens), kube-controller-manager (the
controllers our objects meet: Deployments, ReplicaSets, the garbage collector,
namespaces, service accounts and their tokens, Jobs, HPAs, PodDisruptionBudgets,
PersistentVolume binding and the DRA resourceclaim controller), kube-scheduler (DRA
allocation on: resource.k8s.io/v1 is GA from 1.34), kwok (nodes without containers:
bound pods are made Running and Ready) and the fake DRA driver
(devcluster/fake_dra_driver.py: one ResourceSlice of GPUs per node and the DeviceClass
`gpu.nvidia.com`). Binaries come from scripts/build-kube.sh (`make kube-binaries`);
everything else is made here, in a temporary folder: a CA, serving and client
certificates, a service-account signing key and an admin kubeconfig. Each component is a
process of its own, on 127.0.0.1 with a free port, stopped by its PID.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import ssl
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from .objects import object_path
from .pki import Pki, kubeconfig
from .process import Component, ComponentExited, free_port, script_path, wait_while_running

ROOT = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = ROOT / "scripts" / "build-kube.sh"
DEFAULT_NODES = 2
DEFAULT_GPUS = 4
# How long one component may take to come up on a busy 2-core machine.
START_TIMEOUT = 120.0
CONTROLLERS = (
    "deployment-controller",
    "replicaset-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "clusterrole-aggregation-controller",
    "job-controller",
    "horizontal-pod-autoscaler-controller",
    "disruption-controller",
    "persistentvolume-binder-controller",
    "node-lifecycle-controller",  # lifts the not-ready taint admission puts on new nodes
    "resourceclaim-controller",
    # KEP-5055: deletes pods whose device got a NoExecute taint; kube-controller-manager
    # skips it while the DRADeviceTaints gate is off (off by default before 1.36).
    "device-taint-eviction-controller",
)
# What a real node's Services need on top: EndpointSlices (kube-proxy reads them), the
# Endpoints Prometheus' service discovery reads, and the garbage collection of pods.
NODE_CONTROLLERS = (
    "endpointslice-controller",
    "endpoints-controller",
    "pod-garbage-collector-controller",
    "ttl-controller",
)
# scripts/build-kube.sh's default K8S_VERSION.
PINNED_VERSION = (1, 34)
SERVICE_CIDR = "10.96.0.0/16"
SERVICE_IP = "10.96.0.1"  # the `kubernetes` Service's ClusterIP, first of SERVICE_CIDR


class ClusterError(RuntimeError):
    pass


def binaries_dir() -> Path:
    """Where scripts/build-kube.sh keeps (or would keep) the binaries of K8S_VERSION."""
    return script_path(BUILD_SCRIPT)


BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


def binaries_version(bin_dir: Path) -> tuple[int, int]:
    """(major, minor) of the binaries scripts/build-kube.sh keeps in kube-<version>-<arch>/bin;
    the pinned release's for a folder named otherwise."""
    found = re.match(r"^kube-(\d+)\.(\d+)\.", bin_dir.parent.name)
    if found is None:
        return PINNED_VERSION
    return int(found.group(1)), int(found.group(2))


def sharing_gates(version: tuple[int, int]) -> dict[str, bool]:
    """What GPUs shared through DRA need: consumable capacity (KEP-5075) and partitionable
    devices (KEP-4815) are alpha, off, before 1.36 and on by default from there."""
    if version >= (1, 36):
        return {}
    return {"DRAConsumableCapacity": True, "DRAPartitionableDevices": True}


def missing_binaries(bin_dir: Path) -> list[str]:
    return [b for b in BINARIES if not os.access(bin_dir / b, os.X_OK)]


class KubeCluster:
    """The control plane; `start()` returns once nodes, GPUs and controllers are up."""

    def __init__(
        self,
        bin_dir: Path,
        workdir: Path,
        *,
        nodes: int = DEFAULT_NODES,
        gpus: int = DEFAULT_GPUS,
        address: str = "127.0.0.1",
        feature_gates: Mapping[str, bool] | None = None,
        runtime_config: tuple[str, ...] = (),
        sharing: bool = False,
    ) -> None:
        """`address`: where the apiserver listens and what it advertises. Loopback for
        kwok nodes; a real node's address (devcluster/node.py, inside its network
        namespace) makes this the control plane of a real kubelet: the `kubernetes`
        Service's endpoints are that address (pods reach the apiserver through it), the
        Node authorizer runs beside RBAC, the apiserver reaches kubelets by InternalIP
        with a client certificate (`kubectl logs/exec`), and the controller-manager also
        keeps EndpointSlices (kube-proxy, Prometheus).
        `feature_gates`: `--feature-gates` of kube-apiserver, kube-controller-manager and
        kube-scheduler (e.g. DRADeviceTaints, alpha on 1.34); `runtime_config`:
        kube-apiserver's `--runtime-config` entries (e.g. `resource.k8s.io/v1alpha3=true`
        for DeviceTaintRule on 1.34); `sharing`: the fake driver publishes shareable and
        partitionable GPUs (fake_dra_driver.py), and the gates they need before 1.36 are on."""
        self.version = binaries_version(bin_dir)
        self.sharing = sharing
        self.feature_gates = {**(sharing_gates(self.version) if sharing else {})}
        self.feature_gates.update(feature_gates or {})
        self.runtime_config = runtime_config
        # Read by the fake DRA driver before each publish (taint_devices).
        self.taints_file = workdir / "device-taints.json"
        self.bin = bin_dir
        self.dir = workdir
        self.nodes = [f"kwok-node-{i}" for i in range(nodes)]
        self.gpus = gpus
        self.address = address
        self.real_node = address != "127.0.0.1"
        self.components: dict[str, Component] = {}
        pki_dir = workdir / "pki"
        pki_dir.mkdir(parents=True, exist_ok=True)
        self.pki = Pki(pki_dir)
        sans = (address, SERVICE_IP) if self.real_node else ()
        self.serving = self.pki.issue("apiserver", "kube-apiserver", server=True, ips=sans)
        self.admin_cert = self.pki.issue("admin", "kubernetes-admin", org="system:masters")
        self.kubelet_client = self.pki.issue(
            "apiserver-kubelet-client", "kube-apiserver-kubelet-client", org="system:masters"
        )
        self.sa_key, self.sa_pub = self.pki.signing_key()
        self.etcd_port, self.etcd_peer_port = free_port(), free_port()
        self.port = free_port()
        self.url = f"https://{address}:{self.port}"
        self.admin_kubeconfig = kubeconfig(
            workdir / "admin.kubeconfig",
            self.url,
            self.pki.ca,
            user="kubernetes-admin",
            cert=self.admin_cert[0],
            key=self.admin_cert[1],
        )
        self._ssl = ssl.create_default_context(cafile=str(self.pki.ca))
        self._ssl.load_cert_chain(*self.admin_cert)

    # -- the admin's view (plain HTTPS, no asyncio: the fixture is synchronous) -----------

    def http(self, method: str, path: str, body: Any = None, content_type: str = "") -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", content_type or "application/json")
        try:
            with urllib.request.urlopen(req, context=self._ssl, timeout=30) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            # The apiserver's Status message names the field or rule: keep it in the error.
            detail = e.read().decode(errors="replace")
            raise urllib.error.HTTPError(
                e.url, e.code, f"{e.reason}: {method} {path}: {detail}", e.headers, None
            ) from None
        return json.loads(raw) if raw[:1] in (b"{", b"[") else raw.decode()

    def text(self, path: str) -> str:
        """A GET whose answer is text, as it is (a pod's log: JSON lines)."""
        req = urllib.request.Request(self.url + path)
        with urllib.request.urlopen(req, context=self._ssl, timeout=30) as resp:
            return str(resp.read().decode(errors="replace"))

    def _ok(self, path: str) -> bool:
        try:
            return bool(self.http("GET", path) == "ok")
        except (urllib.error.URLError, OSError, ValueError):
            return False

    # -- components -------------------------------------------------------------------------

    def _component(self, name: str, argv: list[str]) -> Component:
        c = Component(name, argv, self.dir / f"{name}.log")
        self.components[name] = c
        return c

    def _wait(self, what: str, ready: Callable[[], bool], *owners: str) -> None:
        components = {o: self.components[o] for o in owners}
        try:
            wait_while_running(what, ready, components, START_TIMEOUT)
        except ComponentExited as e:
            raise ClusterError(str(e)) from None

    def _etcd(self) -> Component:
        data = self._etcd_data
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        client = f"http://127.0.0.1:{self.etcd_port}"
        return self._component(
            "etcd",
            [
                str(self.bin / "etcd"),
                "--name=default",
                f"--data-dir={data}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}",
                "--unsafe-no-fsync",  # a test's data: speed over durability
                "--log-level=warn",
            ],
        )

    def _etcd_ready(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.etcd_port}/health", timeout=5
            ) as resp:
                return bool(json.loads(resp.read()).get("health") == "true")
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def _apiserver(self) -> Component:
        crt, key = self.serving
        return self._component(
            "kube-apiserver",
            [
                str(self.bin / "kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
                f"--secure-port={self.port}",
                f"--cert-dir={self.dir / 'apiserver-certs'}",
                f"--tls-cert-file={crt}",
                f"--tls-private-key-file={key}",
                f"--client-ca-file={self.pki.ca}",
                f"--service-account-key-file={self.sa_pub}",
                f"--service-account-signing-key-file={self.sa_key}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--api-audiences=https://kubernetes.default.svc.cluster.local",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allow-privileged=true",
                "--v=1",
                *self._gates(),
                *(
                    ["--runtime-config=" + ",".join(self.runtime_config)]
                    if self.runtime_config
                    else []
                ),
                *self._apiserver_node_args(),
            ],
        )

    def _apiserver_node_args(self) -> list[str]:
        if not self.real_node:
            return [
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                "--endpoint-reconciler-type=none",
                "--authorization-mode=RBAC",
            ]
        crt, key = self.kubelet_client
        return [
            "--bind-address=0.0.0.0",  # inside the node's network namespace
            f"--advertise-address={self.address}",
            "--endpoint-reconciler-type=lease",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            "--kubelet-preferred-address-types=InternalIP",
            f"--kubelet-client-certificate={crt}",
            f"--kubelet-client-key={key}",
        ]

    def _kube_controller_manager(self) -> Component:
        return self._component(
            "kube-controller-manager",
            [
                str(self.bin / "kube-controller-manager"),
                f"--kubeconfig={self.admin_kubeconfig}",
                f"--authentication-kubeconfig={self.admin_kubeconfig}",
                f"--authorization-kubeconfig={self.admin_kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.kcm_port}",
                f"--cert-dir={self.dir / 'kcm-certs'}",
                "--controllers=" + ",".join(self._controllers()),
                f"--service-account-private-key-file={self.sa_key}",
                f"--root-ca-file={self.pki.ca}",
                "--use-service-account-credentials=false",
                "--leader-elect=false",
                "--concurrent-gc-syncs=5",
                "--v=1",
                *self._gates(),
            ],
        )

    def _gates(self) -> list[str]:
        if not self.feature_gates:
            return []
        given = ",".join(f"{k}={str(v).lower()}" for k, v in sorted(self.feature_gates.items()))
        return [f"--feature-gates={given}"]

    def taint_devices(self, taints: Mapping[str, list[dict[str, str]]]) -> None:
        """Have the fake DRA driver publish these taints (`<node>/<device>` -> [{key,
        value, effect}]) from its next publish on, replacing those it published before;
        the apiserver keeps them only while DRADeviceTaints is on."""
        staged = self.taints_file.with_suffix(".tmp")
        staged.write_text(json.dumps(dict(taints)))
        staged.replace(self.taints_file)

    def _controllers(self) -> tuple[str, ...]:
        return CONTROLLERS + NODE_CONTROLLERS if self.real_node else CONTROLLERS

    def _kube_scheduler(self) -> Component:
        return self._component(
            "kube-scheduler",
            [
                str(self.bin / "kube-scheduler"),
                f"--kubeconfig={self.admin_kubeconfig}",
                f"--authentication-kubeconfig={self.admin_kubeconfig}",
                f"--authorization-kubeconfig={self.admin_kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.scheduler_port}",
                f"--cert-dir={self.dir / 'scheduler-certs'}",
                "--leader-elect=false",
                "--v=1",
                *self._gates(),
            ],
        )

    def _kwok(self) -> Component:
        stages = sorted((self.bin.parent / "kwok-stages").glob("*.yaml"))
        return self._component(
            "kwok",
            [
                str(self.bin / "kwok"),
                f"--kubeconfig={self.admin_kubeconfig}",
                "--config=" + ",".join(str(s) for s in stages),
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                "--node-ip=127.0.0.1",
                "--node-lease-duration-seconds=40",
            ],
        )

    def _driver(self) -> Component:
        return self._component(
            "fake-dra-driver",
            [
                sys.executable,
                "-m",
                "devcluster.fake_dra_driver",
                f"--kubeconfig={self.admin_kubeconfig}",
                "--nodes=" + ",".join(self.nodes),
                f"--gpus={self.gpus}",
                f"--taints-file={self.taints_file}",
                *(["--sharing"] if self.sharing else []),
                # From 1.35 a pool's counters live in a slice of their own.
                *(["--split-counters"] if self.sharing and self.version >= (1, 35) else []),
            ],
        )

    def _healthz(self, port: int) -> bool:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # the component's own self-signed serving cert
        try:
            with urllib.request.urlopen(
                f"https://127.0.0.1:{port}/healthz", context=ctx, timeout=5
            ) as resp:
                return bool(resp.read() == b"ok")
        except (urllib.error.URLError, OSError):
            return False

    # -- the whole ---------------------------------------------------------------------------

    def start(self) -> KubeCluster:
        self.kcm_port, self.scheduler_port = free_port(), free_port()
        try:
            self._etcd().start()
            self._wait("etcd /health", self._etcd_ready, "etcd")
            self.start_apiserver()
            self._kube_controller_manager().start()
            self._kube_scheduler().start()
            if self.nodes:
                self._kwok().start()
                for node in self.nodes:
                    self.http("POST", "/api/v1/nodes", self._node(node))
                self._driver().start()
            self._wait_controllers()
            if self.nodes:
                self._wait("nodes Ready (kwok)", self._nodes_ready, "kwok")
                self._wait("ResourceSlices", self._slices_published, "fake-dra-driver")
            self._wait(
                "ServiceAccount default/default", self._default_sa, "kube-controller-manager"
            )
        except BaseException:
            self.stop()
            raise
        return self

    def start_apiserver(self) -> None:
        self._apiserver().start()
        self._wait("kube-apiserver /readyz", lambda: self._ok("/readyz"), "kube-apiserver")

    def restart_apiserver(self) -> None:
        """Stop the apiserver and start it again on the same port; etcd keeps the data."""
        self.components["kube-apiserver"].stop()
        self.start_apiserver()

    def snapshot_etcd(self, dest: Path) -> Path:
        """A consistent copy of etcd's data, taken with etcd and the apiserver stopped (a
        cold copy is what `etcdctl snapshot save` gives, without another binary)."""
        self._stop_storage()
        shutil.copytree(self._etcd_data, dest)
        self._start_storage()
        return dest

    def restore_etcd(self, snapshot: Path) -> None:
        """Put an older copy of etcd's data back, as a restore without `--bump-revision`
        does: every resourceVersion goes back to where the copy was taken. Then, as the
        Kubernetes restore procedure says, the controller-manager, the scheduler and the
        kubelets (kwok) restart: their informers would keep the newer state. Whatever
        else runs against the cluster (the controller under test) is left running."""
        self._stop_storage()
        shutil.rmtree(self._etcd_data)
        shutil.copytree(snapshot, self._etcd_data)
        self._start_storage()
        for name in ("kube-controller-manager", "kube-scheduler", "kwok"):
            if name not in self.components:
                continue
            self.components[name].stop()
            self.components[name].start()
        self._wait_controllers()

    def _wait_controllers(self) -> None:
        """Until the controller-manager and the scheduler answer /healthz."""
        for name, port in (
            ("kube-controller-manager", self.kcm_port),
            ("kube-scheduler", self.scheduler_port),
        ):
            self._wait(f"{name} /healthz", functools.partial(self._healthz, port), name)

    @property
    def _etcd_data(self) -> Path:
        return self.dir / "etcd-data"

    def _stop_storage(self) -> None:
        self.components["kube-apiserver"].stop()
        self.components["etcd"].stop()

    def _start_storage(self) -> None:
        self._etcd().start()
        self._wait("etcd /health", self._etcd_ready, "etcd")
        self.start_apiserver()

    def stop(self) -> None:
        for name in reversed(list(self.components)):
            self.components[name].stop()

    def logs(self) -> str:
        return "\n".join(f"--- {n}\n{c.tail(15)}" for n, c in self.components.items())

    def _node(self, name: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {
                    "kwok.x-k8s.io/node": "fake",
                    "node.alpha.kubernetes.io/ttl": "0",
                },
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                    "nvidia.com/gpu.present": "true",
                },
            },
            "spec": {},
            "status": {
                "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
                "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"},
            },
        }

    def _nodes_ready(self) -> bool:
        try:
            items = self.http("GET", "/api/v1/nodes")["items"]
        except (urllib.error.URLError, OSError):
            return False
        ready = {
            n["metadata"]["name"]
            for n in items
            for c in (n.get("status") or {}).get("conditions") or []
            if c.get("type") == "Ready" and c.get("status") == "True"
        }
        return set(self.nodes) <= ready

    def _slices_published(self) -> bool:
        try:
            items = self.http("GET", "/apis/resource.k8s.io/v1/resourceslices")["items"]
            self.http("GET", "/apis/resource.k8s.io/v1/deviceclasses/gpu.nvidia.com")
        except (urllib.error.URLError, OSError):
            return False
        return {s["spec"].get("nodeName") for s in items} >= set(self.nodes)

    def _default_sa(self) -> bool:
        try:
            self.http("GET", "/api/v1/namespaces/default/serviceaccounts/default")
        except (urllib.error.URLError, OSError):
            return False
        return True

    # -- objects ------------------------------------------------------------------------------

    def apply(
        self, obj: dict[str, Any], *, manager: str = "kubectl", strict: bool = True
    ) -> dict[str, Any]:
        """Server-side apply as `manager`; strict: a field the schema does not know is an
        error (422) instead of being pruned in silence."""
        path = object_path(obj)
        query = f"?fieldManager={manager}&force=true"
        if strict:
            query += "&fieldValidation=Strict"
        result: dict[str, Any] = self.http(
            "PATCH", path + query, obj, "application/apply-patch+yaml"
        )
        return result

    def install_crds(self, paths: list[Path]) -> list[dict[str, Any]]:
        crds = [doc for p in paths for doc in yaml.safe_load_all(p.read_text()) if doc]
        for crd in crds:
            self.apply(crd, manager="helm")
        names = [c["metadata"]["name"] for c in crds]

        def established() -> bool:
            for name in names:
                live = self.http(
                    "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
                )
                conds = {
                    c["type"]: c["status"]
                    for c in (live.get("status") or {}).get("conditions") or []
                }
                if conds.get("Established") != "True":
                    return False
            return True

        self._wait("CRDs Established", established, "kube-apiserver")
        return [
            self.http("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{n}")
            for n in names
        ]

    def new_namespace(self, hint: str) -> str:
        base = "".join(ch if ch.isalnum() else "-" for ch in hint.lower()).strip("-")[:40]
        name = f"{base.strip('-') or 't'}-{os.urandom(3).hex()}"
        self.http(
            "POST",
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        )
        # Pods are refused until the serviceaccount controller made `default` here.
        self._wait(
            f"ServiceAccount {name}/default",
            lambda: self._exists(f"/api/v1/namespaces/{name}/serviceaccounts/default"),
            "kube-controller-manager",
        )
        return name

    def delete_namespace(self, name: str) -> None:
        try:
            self.http("DELETE", f"/api/v1/namespaces/{name}")
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise

    def _exists(self, path: str) -> bool:
        try:
            self.http("GET", path)
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return False
            raise
        return True

    # -- service-account credentials ----------------------------------------------------------

    def token(self, namespace: str, service_account: str, seconds: int = 3600) -> str:
        """A token of this ServiceAccount, from the TokenRequest API (as a pod gets one)."""
        review = self.http(
            "POST",
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": seconds},
            },
        )
        token: str = review["status"]["token"]
        return token

    def kubeconfig_for(self, namespace: str, service_account: str, path: Path) -> Path:
        return kubeconfig(
            path,
            self.url,
            self.pki.ca,
            user=f"system:serviceaccount:{namespace}:{service_account}",
            token=self.token(namespace, service_account),
            namespace=namespace,
        )


def start_cluster(
    workdir: Path | None = None,
    *,
    nodes: int = DEFAULT_NODES,
    gpus: int = DEFAULT_GPUS,
    sharing: bool = False,
) -> KubeCluster:
    bin_dir = binaries_dir()
    missing = missing_binaries(bin_dir)
    if missing:
        raise ClusterError(
            f"not built: {', '.join(missing)} in {bin_dir} (make kube-binaries builds them)"
        )
    directory = workdir or Path(tempfile.mkdtemp(prefix="llmkube-kube-"))
    return KubeCluster(bin_dir, directory, nodes=nodes, gpus=gpus, sharing=sharing).start()
