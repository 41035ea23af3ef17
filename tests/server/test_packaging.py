"""The wheel holds the product only, and `llmkube-controller demo` runs from it.

The test API server is its own distribution (packaging/testserver, `llmkube-py-testserver`):
the product wheel and image never carry it; the demo runs it as a program when installed.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_packaging.py.
"""

from __future__ import annotations

import subprocess
import venv
from pathlib import Path

import pytest


@pytest.mark.server  # the demo starts the test API server
def test_demo_runs_from_an_empty_directory_after_installing_the_wheels(
    wheels: dict[str, Path], tmp_path: Path
) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    install = [str(bin_dir / "pip"), "install", "--quiet", "--disable-pip-version-check"]
    # The product alone first: the demo explains how to get the test server.
    subprocess.run([*install, str(wheels["llmkube_py"])], check=True)
    empty = tmp_path / "empty"
    empty.mkdir()
    demo = [str(bin_dir / "llmkube-controller"), "demo"]
    run = subprocess.run(demo, cwd=empty, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "llmkube-py-testserver" in run.stderr, run.stderr
    # The real control plane (devcluster/) comes with a source checkout only.
    run = subprocess.run([*demo, "--cluster"], cwd=empty, capture_output=True, text=True)
    assert run.returncode == 2 and "needs a source checkout" in run.stderr, run.stderr
    # The test server's own dependencies (its CEL library) come with it, not the product.
    testserver = str(wheels["llmkube_py_testserver"])
    subprocess.run([*install, "--find-links", str(Path(testserver).parent), testserver], check=True)
    subprocess.run([str(bin_dir / "pip"), "check"], check=True)
    run = subprocess.run(demo, cwd=empty, capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Demo succeeded" in run.stdout
    assert "ALLOCATED DEVICES" in run.stdout  # the `kubectl llmkube status` excerpt
    assert list(empty.iterdir()) == []
