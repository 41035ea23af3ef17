"""Start llama-server once per argv of argv.json (scripts/gpu-check/argv.py), wait for
/health, send one /completion, read the server's own log, stop it; write results.json.

Standard library only: it runs on the device machine's python3.

    python3 serve_each.py BINARY ARGV_JSON RESULTS_JSON [--deadline EPOCH] [--cpu] [--lv N]

--deadline: a case not started by then is recorded "not run (out of time)", and a case
running then is stopped, so the results are written before the caller's own limit.
--cpu: the rehearsal on a CPU build: GPU buffers in --override-tensor -> CPU (as
tests/unit/test_llama_server_real.py does); everything else runs as on the device.
--lv N: appends `-lv N` (llama.cpp's log verbosity; at 4 it logs "offloaded N/M layers
to GPU" and the flash attention it resolved), after the argv, so nothing else changes.

A server that exits by itself before /health with no error line in its log is started
again, up to ATTEMPTS times in all (said_why: llama.cpp's logger can lose a process's last
lines at exit); the result's "attempts" says how many starts it took.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HEALTH_WAIT = 60.0  # s
PARALLEL = 4
# A server that exits before /health with no reason in its log runs again (said_why).
ATTEMPTS = 3
WHY_IT_EXITED = re.compile(r"^[\d.]+ E |error", re.IGNORECASE)
GPU_BUFFER = re.compile(r"=(CUDA|ROCm|Vulkan|SYCL|Metal)\d*$")
# What the server says about devices, offload, split mode and flash attention.
LOG_LINES = re.compile(
    r"offload|split.mode|split buffers|Meta device|tensor parallel|flash_attn|"
    r"Flash Attention|using device|CUDA\d model buffer|error|failed|exception|abort|fatal",
    re.IGNORECASE,
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def http(port: int, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=data,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def device_argv(args: list[str], port: int, cpu: bool) -> list[str]:
    out = [str(port) if a == "PORT" else a for a in args]
    if cpu:
        out = [GPU_BUFFER.sub("=CPU", a) for a in out]
    return out


def run_case(
    binary: str, case: dict[str, Any], deadline: float, cpu: bool, lv: str | None
) -> dict[str, Any]:
    result: dict[str, Any] = {"name": case["name"], "expect": case["expect"]}
    if case.get("diagnostic"):
        result["diagnostic"] = case["diagnostic"]
    if time.time() > deadline - 10:
        return {**result, "ok": False, "note": "not run (out of time)"}
    for attempt in range(1, ATTEMPTS + 1):
        port = free_port()
        argv = device_argv(case["args"], port, cpu) + (["-lv", lv] if lv else [])
        result["argv"] = argv
        result["attempts"] = attempt
        log, stopped = serve_once(binary, argv, port, deadline, result)
        done = stopped or result["health"] or result["exit"] == 0 or said_why(log)
        if done or time.time() > deadline - 10:
            break
    result["log_lines"] = [ln for ln in log.splitlines() if LOG_LINES.search(ln)][:80]
    result["log_tail"] = log.splitlines()[-40:]
    served = result["health"] and result.get("completion", {}).get("status") == 200
    if case["expect"] == "serve":
        result["ok"] = bool(served and "ok" in result["completion"]["content"])
    else:  # refused by us: it must fail there, with the message our refusal quotes
        result["ok"] = not result["health"] and case["exit_message"] in log
    return result


def said_why(log: str) -> bool:
    """Whether a server that exited by itself left the reason in its log.

    Each failure path of tools/server/server.cpp main() ends in an error-level line, and
    argument errors are written to stderr directly. The other lines go through common/log.cpp's
    queue, whose worker thread writes them; its logger is leaked at exit on purpose
    (common_log_main), so a process that exits before that thread runs loses its last lines.
    On a busy machine that can be every line from the startup warnings on.
    """
    return any(WHY_IT_EXITED.search(line) for line in log.splitlines())


def serve_once(
    binary: str, argv: list[str], port: int, deadline: float, result: dict[str, Any]
) -> tuple[str, bool]:
    """One start of the server: health, start_s, completion and exit into result.

    Returns its log, and whether it was still running (so stopped here) when it was done.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
    started = time.monotonic()
    proc = subprocess.Popen(
        [binary, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        env=env,
    )
    healthy = False
    wait_until = min(time.monotonic() + HEALTH_WAIT, time.monotonic() + deadline - time.time())
    while time.monotonic() < wait_until and proc.poll() is None:
        try:
            if http(port, "GET", "/health")[0] == 200:
                healthy = True
                break
        except OSError:
            pass
        time.sleep(0.2)
    result["health"] = healthy
    result["start_s"] = round(time.monotonic() - started, 1)
    result.pop("completion", None)
    if healthy:
        try:
            status, body = http(port, "POST", "/completion", {"prompt": "hello", "n_predict": 8})
            content = body.get("content", "") if isinstance(body, dict) else str(body)
            result["completion"] = {"status": status, "content": content[:200]}
            if isinstance(body, dict):
                result["completion"]["tokens_predicted"] = body.get("tokens_predicted")
        except (OSError, ValueError) as e:
            result["completion"] = {"error": f"{type(e).__name__}: {e}"}
    stopped = proc.poll() is None
    if stopped:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    log = proc.communicate()[0]
    result["exit"] = proc.returncode
    return log, stopped


def main() -> int:
    binary, argv_json, results_json = sys.argv[1:4]
    rest = sys.argv[4:]
    cpu = "--cpu" in rest
    deadline = float(rest[rest.index("--deadline") + 1]) if "--deadline" in rest else 1e18
    lv = rest[rest.index("--lv") + 1] if "--lv" in rest else None
    cases = json.loads(Path(argv_json).read_text())
    with ThreadPoolExecutor(PARALLEL) as pool:
        results = list(pool.map(lambda c: run_case(binary, c, deadline, cpu, lv), cases))
    Path(results_json).write_text(json.dumps(results, indent=1) + "\n")
    for r in results:
        mark = ("OK  " if r["ok"] else "FAIL") + (" (diagnostic)" if "diagnostic" in r else "")
        how = r.get("note") or (
            f"health={r['health']} exit={r['exit']} start={r['start_s']}s "
            f"completion={r.get('completion', {}).get('content', '-')!r}"
        )
        print(f"{mark} {r['name']:28} expect={r['expect']:5} {how}")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
