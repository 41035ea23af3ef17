"""`make demo-cluster`: the demo's steps and report on the real control plane.

`llmkube-controller demo --cluster` runs as the Makefile runs it, from a folder outside
the checkout: it starts `python -m devcluster` (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kwok, the fake DRA driver), runs the same demo
as `make demo` on it, and stops every component afterwards. What it prints comes from the
real apiserver: the pools `kwok-node-N` are the fake driver's ResourceSlices (the
simulated cluster's are `gpu-node-N`), the devices were allocated by the real scheduler,
and the rule that refuses the invalid Model is the CRD's CEL rule run by the apiserver.

Here the tests that need no API server; those that run on the real control plane are in
tests/cluster/test_cluster_demo.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DEMO = [str(Path(sys.executable).parent / "llmkube-controller"), "demo", "--cluster"]
# Starting the control plane and the demo's waits take longer than the suite's default.
pytestmark = pytest.mark.timeout(900)


def test_demo_cluster_without_binaries_says_what_is_missing() -> None:
    # A version never built: `python -m devcluster` names the binaries and the make target.
    env = {**os.environ, "K8S_VERSION": "1.0.0"}
    run = subprocess.run(DEMO, capture_output=True, text=True, timeout=120, env=env)
    assert run.returncode == 2, run.stdout + run.stderr
    assert re.search(
        r"^python -m devcluster: not built: etcd, kube-apiserver, .*kube-1\.0\.0-\S+ "
        r"\(make kube-binaries builds them\)$",
        run.stderr,
        re.M,
    ), run.stderr
    assert "The real control plane did not start" in run.stderr
    assert "Demo" not in run.stdout
