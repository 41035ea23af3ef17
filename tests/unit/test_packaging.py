"""The wheel holds the product only, and `llmkube-controller demo` runs from it.

The test API server is its own distribution (packaging/testserver, `llmkube-py-testserver`):
the product wheel and image never carry it; the demo runs it as a program when installed.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_packaging.py.
"""

from __future__ import annotations

import filecmp
import zipfile
from pathlib import Path

import pytest

from tests.support.packaging import PRODUCT, ROOT


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
