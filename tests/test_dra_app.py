"""Issue 13 at the edges: the Kueue mapping flag and chart value, the printer column and
`kubectl llmkube status` of a DRA service sized from its claims."""

from __future__ import annotations

import argparse

import pytest

from app.cli import kueue_mappings, parse
from app.manifests import apply_text
from controller.kube import KubeClient
from controller.resources import INFERENCE_SERVICE

from .conftest import eventually, gpu_template
from .support.chart import controller_args, find, render
from .support.plugin import cluster, kubectl

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


async def test_status_and_printer_column_of_a_service_sized_from_its_claims(
    cluster: tuple[KubeClient, dict[str, str]],
) -> None:
    client, env = cluster
    await apply_text(client, gpu_template("two-gpus", 2), "team-a")
    code, out = await kubectl(
        env,
        "llmkube",
        "deploy",
        "chat",
        "--source=Qwen/Qwen3-32B",
        "--format=safetensors",
        "--runtime=vllm",
        "--claim-template=two-gpus",
    )
    assert code == 0, out

    async def allocated() -> bool:
        isvc = await client.get(INFERENCE_SERVICE, "team-a", "chat")
        alloc = ((isvc or {}).get("status") or {}).get("allocation") or {}
        return alloc.get("summary") == "2/2"

    await eventually(allocated, timeout=30, what="chat 2/2 devices")
    code, out = await kubectl(env, "get", "isvc", "chat")
    assert code == 0, out
    header, row = out.splitlines()[:2]
    assert "DEVICES" in header.split()
    assert row.split()[header.split().index("DEVICES")] == "2/2"

    code, out = await kubectl(env, "llmkube", "status", "chat")
    assert code == 0, out
    lines = out.splitlines()
    assert any(line.strip().startswith("Devices:   2/2 allocated by DRA") for line in lines), out
    sized = ["DeviceCount", "True", "SizedFromClaims"]
    assert any(line.split()[:3] == sized for line in lines), out
    claim = next(line for line in lines if line.strip().startswith("gpu "))
    assert claim.count("gpu-node-") == 2, claim
    # Each device as its ResourceSlice describes it.
    table = lines[lines.index("Devices:") + 1 :]
    assert table[0].split() == ["POD", "DEVICE", "PRODUCT", "MEMORY"], out
    for row in table[1:3]:
        assert "gpu.nvidia.com/gpu-node-" in row and "NVIDIA H100 80GB HBM3" in row, out
        assert row.split()[-1] == "80Gi", out
