"""Shared by the tests of prometheus in more than one tier."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from objtypes import Obj

from .chart import find, render

PROMTOOL = shutil.which("promtool")

# The target labels Kubernetes discovery gives the controller's pod (release "llmkube").
POD = "llmkube-7d4b9c8f6c-x2x7k"


def chart_rules(values: Obj | None = None) -> Obj:
    """The PrometheusRule's groups, as a Prometheus rule file."""
    values = {"metrics": {"prometheusRule": {"enabled": True}}, **(values or {})}
    rule = find(render(values), "PrometheusRule")
    return {"groups": rule["spec"]["groups"]}


def alert_rules(rules: Obj) -> dict[str, Obj]:
    return {r["alert"]: r for g in rules["groups"] for r in g["rules"]}


async def promtool(*args: str, cwd: Path | None = None, stdin: str = "") -> tuple[int, str]:
    assert PROMTOOL is not None
    process = await asyncio.create_subprocess_exec(
        PROMTOOL,
        *args,
        cwd=cwd,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await process.communicate(stdin.encode())
    assert process.returncode is not None
    return process.returncode, out.decode()
