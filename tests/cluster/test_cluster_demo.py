"""`make demo-cluster`: the demo's steps and report on the real control plane.

`llmkube-controller demo --cluster` runs as the Makefile runs it, from a folder outside
the checkout: it starts `python -m devcluster` (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kwok, the fake DRA driver), runs the same demo
as `make demo` on it, and stops every component afterwards. What it prints comes from the
real apiserver: the pools `kwok-node-N` are the fake driver's ResourceSlices (the
simulated cluster's are `gpu-node-N`), the devices were allocated by the real scheduler,
and the rule that refuses the invalid Model is the CRD's CEL rule run by the apiserver.

Here the tests that run on the real control plane; those that need no API server are in
tests/unit/test_cluster_demo.py.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.kube_cluster import kube_binaries

DEMO = [str(Path(sys.executable).parent / "llmkube-controller"), "demo", "--cluster"]
# Starting the control plane and the demo's waits take longer than the suite's default.
pytestmark = pytest.mark.timeout(900)


def workdir_of(out: str) -> Path:
    """The control plane's folder, from the admin kubeconfig the demo names."""
    found = re.search(r"^admin kubeconfig: (/\S+)$", out, re.M)
    assert found, out
    return Path(found.group(1)).parent


def running_in(workdir: Path) -> list[str]:
    """Processes whose command line names the folder (the components' flags all do)."""
    left = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if proc.name.isdigit() and str(workdir) in argv:
            left.append(f"{proc.name}: {argv[:200]}")
    return left


def stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM, as a user's `kill` would: the demo stops the control plane it started
    (SIGKILL would leave it running)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(300)


def section(out: str, name: str) -> str:
    """The report's block of one InferenceService."""
    found = re.search(rf"^InferenceService {re.escape(name)} .*?(?=^\S|\Z)", out, re.M | re.S)
    assert found, out
    return found.group(0)


@pytest.mark.cluster
def test_demo_cluster_runs_the_demo_on_the_real_control_plane(tmp_path: Path) -> None:
    kube_binaries()
    # As `make demo-cluster` runs it. A demo that failed ends after its waits (150 s
    # each on the real control plane), well inside this limit.
    proc = subprocess.Popen(
        DEMO, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        out, err = proc.communicate(timeout=800)
    finally:
        stop(proc)
    assert proc.returncode == 0, out[-6000:] + err[-3000:]
    assert out.startswith("Real control plane (etcd, kube-apiserver,"), out[:500]
    # The invalid Model is refused by the CRD's CEL rule at the apiserver, naming the field.
    assert re.search(
        r"claims-and-resource-name \(breaks a rule\) rejected: .*spec\.hardware\.gpu: .*"
        r"resourceClaims and resourceName are mutually exclusive",
        out,
    ), out
    # The multi-GPU service: Ready, vLLM told 2, and 2 devices of one node's
    # ResourceSlice allocated by the real scheduler to its pod.
    multi = section(out, "qwen3-32b")
    assert "phase=Ready" in multi and "--tensor-parallel-size 2" in multi, multi
    assert "devices allocated:        2/2" in multi, multi
    pools = re.findall(r"gpu\.nvidia\.com/(kwok-node-\d)/gpu-\d", multi)
    assert len(pools) == 2 and len(set(pools)) == 1, multi
    # Sized from its template alone (no count): 2 devices as well.
    sized = section(out, "qwen3-32b-from-claims")
    assert "SizedFromClaims" in sized and "devices allocated:        2/2" in sized, sized
    assert "devices allocated:        1/1" in section(out, "qwen3-embedding")
    assert out.count("Devices:   2/2 allocated by DRA") == 2, out
    # The Model without claims: a template the controller made, allocated by the scheduler.
    managed = section(out, "qwen3-8b-managed")
    assert "made for it:              ResourceClaimTemplate qwen3-8b-managed-gpus-" in managed
    assert "ManagedClaims" in managed and "devices allocated:        1/1" in managed, managed
    # Two services sharing one GPU: the scheduler put both 40Gi shares on one device that
    # allows multiple allocations, and vLLM preallocates half of it.
    for name in ("qwen3-8b-shared-a", "qwen3-8b-shared-b"):
        shared = section(out, name)
        assert "phase=Ready" in shared and "--gpu-memory-utilization 0.5" in shared, shared
        assert "shared:                   40Gi of the device's memory" in shared, shared
    shares = re.findall(r"devices=1  share of (kwok-node-\d/gpu-\d) 40Gi$", out, re.M)
    assert shares == ["kwok-node-0/gpu-3"] * 2, out  # the cluster's one shareable GPU
    # Six claims made by the real resourceclaim controller, all allocated.
    claims = re.findall(r"^  (\S+-gpus?-\w+)\s+devices=(\d)", out, re.M)
    assert sorted(int(n) for _, n in claims) == [1, 1, 1, 1, 2, 2], out
    # The cache PVC bound to the demo's PersistentVolume; kwok ran no loader, said so.
    assert "PVC llmkube-model-cache: Bound, volume demo-llmkube-model-cache" in out, out
    assert out.count("model-loader Completed, no report (nothing ran)") == 2, out
    assert "Model tinyllama stays Pending:" in out and "DownloadPending" in out, out
    assert "Demo succeeded on the real control plane" in out, out
    # Every component stopped and the folder removed.
    workdir = workdir_of(out)
    assert not workdir.exists() and running_in(workdir) == []


@pytest.mark.cluster
def test_demo_cluster_stopped_by_sigterm_stops_the_control_plane(tmp_path: Path) -> None:
    kube_binaries()
    proc = subprocess.Popen(
        [*DEMO, "--keep-running"], cwd=tmp_path, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("  kubectl llmkube status"):
                break
        out = "".join(lines)
        assert "Still running (Ctrl-C stops)" in out, out[-4000:]
        workdir = workdir_of(out)
        assert workdir.is_dir() and running_in(workdir), out[-2000:]
    finally:
        stop(proc)
    assert proc.returncode == 128 + signal.SIGTERM
    assert running_in(workdir) == []
    assert not workdir.exists()
