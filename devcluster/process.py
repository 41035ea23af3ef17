"""One component of the control plane as a process of its own, stopped by its PID."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Component:
    name: str
    argv: list[str]
    log: Path
    env: dict[str, str] | None = None  # None: this process's environment
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=self.env,
            )

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace: float = 10.0) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def wait_while_running(
    what: str,
    ready: Callable[[], bool],
    owners: Mapping[str, Component],
    timeout: float,
    tail: int = 30,
) -> None:
    """Poll `ready` until it holds; fail at once, with its log's tail, when one of
    `owners` exits first, and with every owner's tail after `timeout` seconds. Raises
    ComponentExited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        for name, c in owners.items():
            if not c.running():
                raise ComponentExited(f"{name} exited while waiting for {what}:\n{c.tail(tail)}")
        time.sleep(0.2)
    logs = "\n".join(f"--- {name}\n{c.tail(tail)}" for name, c in owners.items())
    raise ComponentExited(f"timed out after {timeout:.0f} s waiting for {what}\n{logs}")


class ComponentExited(RuntimeError):
    """A component exited, or never became ready, while something waited for it."""


def script_path(script: Path) -> Path:
    """What a build script of scripts/ prints for `--path`: where it keeps (or would
    keep) what it builds, without building."""
    out = subprocess.run(
        ["bash", str(script), "--path"], capture_output=True, text=True, check=True
    )
    return Path(out.stdout.strip())
