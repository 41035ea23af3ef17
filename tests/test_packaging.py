"""The wheel holds the product only, and `llmkube-controller demo` runs from it.

The test API server is its own distribution (packaging/testserver, `llmkube-py-testserver`):
the product wheel and image never carry it; the demo runs it as a program when installed.
"""

from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = {
    "app",
    "api",
    "controller",
    "metrics",
    "reconcilers",
    "runtimes",
    "webhook",
    "objtypes.py",
}
SOURCES = ["pyproject.toml", "README.md", "packaging", "testserver", *sorted(PRODUCT)]


@pytest.mark.parametrize(
    ("shipped", "source"),
    [("app/data/crds", "charts/llmkube/crds"), ("app/data/examples", "examples")],
)
def test_package_data_is_a_copy_of_the_charts_crds_and_the_examples(
    shipped: str, source: str
) -> None:
    # `make sync-data` refreshes the copies after `make crds` regenerates the chart's CRDs.
    names = sorted(p.name for p in (ROOT / source).glob("*.yaml"))
    assert sorted(p.name for p in (ROOT / shipped).glob("*.yaml")) == names
    _, mismatch, errors = filecmp.cmpfiles(ROOT / shipped, ROOT / source, names, shallow=False)
    assert (mismatch, errors) == ([], []), "run `make sync-data`"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both wheels, built from a clean copy of the sources (no stale build/ directory)."""
    src = tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns("__pycache__", "build", "*.egg-info")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=ignore)
        elif (ROOT / name).exists():
            shutil.copy(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("wheels")
    pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
    pip += ["--wheel-dir", str(out)]
    subprocess.run([*pip, str(src), str(src / "packaging" / "testserver")], check=True)
    return {p.name.split("-")[0]: p for p in out.glob("*.whl")}


def _packages(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as z:
        return {n.split("/")[0] for n in z.namelist() if not n.split("/")[0].endswith(".dist-info")}


def test_the_product_wheel_holds_only_product_packages(wheels: dict[str, Path]) -> None:
    product = _packages(wheels["llmkube_py"])
    assert product <= PRODUCT and {"app", "controller", "reconcilers"} <= product
    with zipfile.ZipFile(wheels["llmkube_py"]) as z:
        names = set(z.namelist())
    assert "app/data/crds/inference.llmkube.dev_models.yaml" in names
    assert "app/data/examples/multi-gpu.yaml" in names
    assert "runtimes/data/runtime_options.json" in names  # runtimes.parsers reads it
    assert _packages(wheels["llmkube_py_testserver"]) == {"testserver"}
    # Nor does the product depend on what only the test server uses.
    assert "common-expression-language" not in _requires(wheels["llmkube_py"])
    assert "common-expression-language" in _requires(wheels["llmkube_py_testserver"])


def _requires(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as z:
        metadata = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return "\n".join(
            line
            for line in z.read(metadata).decode().splitlines()
            if line.startswith("Requires-Dist") and "extra ==" not in line  # what it installs
        )


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
