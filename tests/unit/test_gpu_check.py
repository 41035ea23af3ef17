"""scripts/gpu-check: the GPU argv it sends to a CUDA build come from the product's code
and say what docs/runtimes.md says, and its runner works (rehearsed on the CPU build).

The CUDA run itself needs the device machine; docs/runtimes.md records its result.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.paths import REPO

CHECK = REPO / "scripts" / "gpu-check"


def _script_module(name: str) -> ModuleType:
    """scripts/gpu-check/<name>.py (a folder of scripts, not a package) as a module."""
    spec = importlib.util.spec_from_file_location(f"gpu_check_{name}", CHECK / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _value(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


@pytest.fixture(scope="module")
def rendered() -> dict[str, dict[str, object]]:
    # render() stops where our checks accept a case it expects refused, or refuse one
    # it expects served.
    return {c["name"]: c for c in _script_module("argv").render("/m/tiny.gguf")}


def test_the_device_argv_is_the_pod_argv_with_only_model_host_and_port_replaced(
    rendered: dict[str, dict[str, object]],
) -> None:
    for case in rendered.values():
        if "diagnostic" in case:
            continue
        pod, dev = case["pod_args"], case["args"]
        assert isinstance(pod, list) and isinstance(dev, list)
        assert _value(dev, "--model") == "/m/tiny.gguf"
        assert (_value(dev, "--host"), _value(dev, "--port")) == ("127.0.0.1", "PORT")
        kept = [a for a in dev if a not in ("--model", "/m/tiny.gguf", "127.0.0.1", "PORT")]
        assert kept == [
            a
            for i, a in enumerate(pod)
            if a != "--model" and (i == 0 or pod[i - 1] not in ("--model", "--host", "--port"))
        ]


@pytest.mark.parametrize(
    ("name", "split_mode", "tensor_split", "gpu_layers"),
    [
        ("gpu1-defaults", None, None, "99"),
        ("gpu1-layers-1", None, None, "1"),
        ("gpu2-layer", "layer", "1,1", "99"),
        ("gpu2-layer-layersplit", "layer", "2,1", "99"),
        ("gpu2-pipeline", "layer", "1,1", "99"),
        ("gpu2-none", "none", None, "99"),
        ("gpu2-tensor-fa-on", "tensor", "1,1", "99"),
        ("gpu2-row-refused", "row", "1,1", "99"),
    ],
)
def test_the_gpu_flags_are_those_the_docs_name(
    rendered: dict[str, dict[str, object]],
    name: str,
    split_mode: str | None,
    tensor_split: str | None,
    gpu_layers: str,
) -> None:
    args = rendered[name]["args"]
    assert isinstance(args, list)
    assert _value(args, "--split-mode") == split_mode
    assert _value(args, "--tensor-split") == tensor_split
    assert _value(args, "--n-gpu-layers") == gpu_layers


def test_the_runner_serves_and_records_each_argv_on_the_cpu_build(tmp_path: Path) -> None:
    """serve_each.py over every case with the CPU llama-server (--cpu): the cases a CPU
    build can serve answer /completion; tensor split has no device there and exits."""
    binary = subprocess.run(
        ["bash", str(REPO / "scripts" / "build-llama-server.sh"), "--path"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(binary).is_file():
        pytest.skip(f"llama-server not built ({binary}): scripts/build-llama-server.sh")
    argv = _script_module("argv")
    model = tmp_path / "tiny.gguf"
    argv.write_models(model)
    argv_json = tmp_path / "argv.json"
    argv_json.write_text(json.dumps(argv.render(str(model))))
    results_json = tmp_path / "results.json"
    runner = [sys.executable, str(CHECK / "serve_each.py"), binary]
    done = subprocess.run(
        [*runner, str(argv_json), str(results_json), "--cpu"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    results = {r["name"]: r for r in json.loads(results_json.read_text())}
    no_device = {n for n, r in results.items() if "--split-mode tensor" in " ".join(r["argv"])}
    for name, r in results.items():
        if name in no_device:
            assert not r["health"], (name, r)
            # The refusal is the server's last words: in log_tail even when log_lines (the
            # first 80 matching lines) is full.
            said = [*r["log_lines"], *r["log_tail"]]
            assert any("needs >= 1 devices" in ln for ln in said), (name, r["log_tail"])
        elif r["expect"] == "serve":
            assert r["ok"] and r["completion"]["status"] == 200, (name, r)
    # row split: a CPU build ignores the split mode and serves, so the refusal's check fails
    assert not results["gpu2-row-refused"]["ok"] and done.returncode == 1
    assert results["diag-layer-h64"]["ok"] and len(no_device) == 7


def test_each_diagnostic_differs_from_its_base_only_as_it_says(
    rendered: dict[str, dict[str, object]],
) -> None:
    diagnostics = {n: c for n, c in rendered.items() if "diagnostic" in c}
    assert len(diagnostics) == 5
    for case in diagnostics.values():
        base_name, _, changes = str(case["diagnostic"]).partition(" with ")
        base = rendered[base_name]["args"]
        args = case["args"]
        assert isinstance(base, list) and isinstance(args, list)
        expected = list(base)
        if "head-64 model" in changes:
            expected[expected.index("/m/tiny.gguf")] = "/m/tiny-h64.gguf"
        if "no --tensor-split" in changes:
            i = expected.index("--tensor-split")
            del expected[i : i + 2]
        assert args == expected and args != base


# A stand-in for llama-server that fails to load its model. It writes its startup warning,
# and its error lines only from the start named by SAYS_WHY_FROM on: before that it exits as
# a llama-server whose log worker never ran does (common/log.cpp, common_log_main).
_LOSES_ITS_LOG = """#!/bin/sh
n=$(( $(cat "$COUNT" 2>/dev/null || echo 0) + 1 )); echo "$n" > "$COUNT"
echo "0.00.001.000 W srv  start: CORS proxy is enabled, do not use in production"
if [ "$n" -ge "$SAYS_WHY_FROM" ]; then
  echo "0.00.002.000 E llama_prepare_model_devices: LLAMA_SPLIT_MODE_TENSOR needs >= 1 devices"
  echo "0.00.003.000 E srv  llama_server: exiting due to model loading error"
fi
exit 1
"""


@pytest.mark.parametrize(("says_why_from", "starts"), [(1, 1), (2, 2), (3, 3), (9, 3)])
def test_a_server_that_exits_with_no_reason_logged_is_started_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, says_why_from: int, starts: int
) -> None:
    """A start whose log lost its error lines is run again, at most ATTEMPTS times; the
    result is the last start's, with its log, and says how many starts it took."""
    serve_each = _script_module("serve_each")
    binary = tmp_path / "llama-server"
    binary.write_text(_LOSES_ITS_LOG)
    binary.chmod(0o755)
    count = tmp_path / "count"
    monkeypatch.setenv("COUNT", str(count))
    monkeypatch.setenv("SAYS_WHY_FROM", str(says_why_from))
    case = {
        "name": "c",
        "expect": "refuse",
        "args": ["--port", "PORT"],
        "exit_message": "needs >= 1 devices",
    }
    r = serve_each.run_case(str(binary), case, 1e18, False, None)
    assert int(count.read_text()) == starts == r["attempts"]
    assert r["exit"] == 1 and not r["health"]
    said = any("needs >= 1 devices" in ln for ln in r["log_tail"])
    assert r["ok"] is said is (says_why_from <= serve_each.ATTEMPTS)


def test_a_server_still_starting_when_health_gives_up_is_started_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a server that exits by itself is started again: one still starting when /health
    gives up is stopped, and not run again."""
    serve_each = _script_module("serve_each")
    monkeypatch.setattr(serve_each, "HEALTH_WAIT", 0.5)
    binary = tmp_path / "llama-server"
    binary.write_text(f'#!/bin/sh\necho start >> "{tmp_path}/starts"\nexec sleep 30\n')
    binary.chmod(0o755)
    case = {"name": "c", "expect": "serve", "args": ["--port", "PORT"]}
    r = serve_each.run_case(str(binary), case, 1e18, False, None)
    assert r["attempts"] == 1 and not r["ok"] and r["exit"] != 0
    assert (tmp_path / "starts").read_text() == "start\n"
