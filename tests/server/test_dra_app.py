"""Issue 13 at the edges: the Kueue mapping flag and chart value, the printer column and
`kubectl llmkube status` of a DRA service sized from its claims.

Here the tests that run on the test API server; those that need no API server are in
tests/unit/test_dra_app.py.
"""

from __future__ import annotations

from app.manifests import apply_text
from controller.kube import KubeClient
from controller.resources import INFERENCE_SERVICE
from tests.support.manifests import gpu_template
from tests.support.plugin import cluster, kubectl
from tests.support.waiting import eventually

__all__ = ["cluster"]  # the fixture, used by name


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
