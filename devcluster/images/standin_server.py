"""The serving stand-in: runs inside the node tier's image for vLLM, SGLang and TGI (their
real images need a GPU). NOT a runtime: it serves no model. It starts under the runtime's
command (`vllm serve ...`, `python3 -m sglang.launch_server ...`,
`text-generation-launcher ...`), records what the kubelet gave it and answers:

  GET /health   200, on the address and port the runtime's own defaults or flags say
  GET /standin  the record: argv, environment (the CDI variables included), uid, gid,
                groups, capabilities, seccomp, no_new_privs, mounts, working directory

The record is also printed as one JSON line at start (kubectl logs). Standard library
only: it runs on the image's Debian Python, not the project's.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# Each runtime's own defaults when its flags do not say: (host, port).
DEFAULTS = {
    "vllm": ("0.0.0.0", 8000),
    "sglang": ("127.0.0.1", 30000),
    "tgi": ("0.0.0.0", int(os.environ.get("PORT") or 3000)),
}
HOST_FLAGS = {"vllm": "--host", "sglang": "--host", "tgi": "--hostname"}


def flag(argv: list[str], name: str) -> str | None:
    """The value of `name` (either `name value` or `name=value`), else None."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def status_fields() -> dict[str, str]:
    wanted = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in wanted:
                out[key] = value.strip()
    return out


def mounts() -> list[dict[str, str]]:
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            out.append({"path": fields[4], "options": fields[5], "type": fields[sep + 1]})
    return out


def record(program: str, argv: list[str]) -> dict[str, Any]:
    return {
        "standin": True,
        "program": program,
        "argv": argv,
        "env": dict(os.environ),
        "uid": os.getuid(),
        "gid": os.getgid(),
        "groups": sorted(os.getgroups()),
        "status": status_fields(),
        "mounts": mounts(),
        "cwd": os.getcwd(),
    }


class DualStackServer(ThreadingHTTPServer):
    def server_bind(self) -> None:
        if self.address_family == socket.AF_INET6:
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


def main() -> None:
    program, argv = sys.argv[1], sys.argv[2:]
    host, port = DEFAULTS[program]
    host = flag(argv, HOST_FLAGS[program]) or host
    port = int(flag(argv, "--port") or port)
    seen = record(program, argv)
    print(json.dumps(seen, sort_keys=True), flush=True)
    body = json.dumps(seen, sort_keys=True).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                self._send(200, b"ok", "text/plain")
            elif self.path == "/standin":
                self._send(200, body, "application/json")
            else:
                self._send(404, b"stand-in: no model is served here", "text/plain")

        def _send(self, code: int, data: bytes, kind: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    DualStackServer.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server = DualStackServer((host, port), Handler)
    print(f"stand-in {program} listening on {host}:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
