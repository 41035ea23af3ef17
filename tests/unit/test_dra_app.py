"""Issue 13 at the edges: the Kueue mapping flag and chart value, the printer column and
`kubectl llmkube status` of a DRA service sized from its claims.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_dra_app.py.
"""

from __future__ import annotations

import argparse

import pytest

from app.cli import kueue_mappings, parse
from tests.support.chart import controller_args, find, render
from tests.support.plugin import cluster

__all__ = ["cluster"]  # the fixture, used by name


def test_kueue_mapping_flag_repeats_and_names_the_field() -> None:
    args = parse(
        [
            "--kueue-device-class-mapping",
            "gpu.nvidia.com=nvidia.com/gpu",
            "--kueue-device-class-mapping=h100.nvidia.com=gpus,a100.nvidia.com=gpus",
        ]
    )
    merged: dict[str, str] = {}
    for m in args.kueue_device_class_mappings:
        merged.update(m)
    assert merged == {
        "gpu.nvidia.com": "nvidia.com/gpu",
        "h100.nvidia.com": "gpus",
        "a100.nvidia.com": "gpus",
    }
    assert parse([]).kueue_device_class_mappings == [{}]
    with pytest.raises(SystemExit):
        parse(["--kueue-device-class-mapping", "gpu.nvidia.com"])


def test_kueue_mapping_error_message() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected DEVICECLASS=RESOURCE"):
        kueue_mappings("=nvidia.com/gpu")


def test_chart_passes_kueue_device_class_mappings() -> None:
    values = {
        "kueue": {
            "deviceClassMappings": [
                {"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com", "h100"]}
            ]
        }
    }
    args = controller_args(render(values))
    assert "--kueue-device-class-mapping=gpu.nvidia.com=nvidia.com/gpu" in args
    assert "--kueue-device-class-mapping=h100=nvidia.com/gpu" in args
    assert not [a for a in controller_args(render({})) if a.startswith("--kueue")]
    # Only reads on the DRA objects, classes and slices included.
    rules = find(render({}), "ClusterRole")["rules"]
    dra = next(r for r in rules if r["apiGroups"] == ["resource.k8s.io"])
    assert set(dra["resources"]) >= {"deviceclasses", "resourceslices"}
    assert dra["verbs"] == ["get", "list", "watch"]


def test_chart_schema_rejects_a_mapping_without_classes() -> None:
    with pytest.raises(Exception, match="deviceClassNames"):
        render({"kueue": {"deviceClassMappings": [{"name": "nvidia.com/gpu"}]}})
