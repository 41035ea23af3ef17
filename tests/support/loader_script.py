"""Shared by the tests of loader_script in more than one tier."""

from __future__ import annotations

import hashlib
import json
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from reconcilers.sources.loader import SCRIPT

BODY = b"GGUF" + bytes(range(256)) * 1024  # 256 KiB: more than curl buffers
SUM = hashlib.sha256(BODY).hexdigest()
EVIL = b"GGUF attacker weights"
EVIL_SUM = hashlib.sha256(EVIL).hexdigest()


class Origin:
    """Serves its files with ETag, If-None-Match and Range; records every request.

    `redirects` answers a path with 302 to a URL; `hold` makes a response send its first
    `hold` bytes and wait for `release`; `barrier` makes each response wait until that
    many requests are being answered at once."""

    def __init__(self) -> None:
        self.files = {"/model.gguf": BODY, "/b.bin": b"second file"}
        self.redirects: dict[str, str] = {}
        self.linked: dict[str, str] = {}  # a redirect's X-Linked-Etag, as the hub sends
        self.etag = '"v1"'
        self.gets: list[tuple[str, str | None]] = []  # (path, Range)
        self.auth: list[tuple[str, str | None]] = []  # (path, Authorization)
        self.puts: list[tuple[str, bytes]] = []
        self.cut: int | None = None  # stop a response after this many bytes
        self.hold: int | None = None
        self.release = threading.Event()
        self.barrier: threading.Barrier | None = None

    def handler(self) -> type[BaseHTTPRequestHandler]:
        origin = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_PUT(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                origin.puts.append((self.path, self.rfile.read(length)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_POST = do_PUT

            def do_GET(self) -> None:
                origin.gets.append((self.path, self.headers.get("Range")))
                origin.auth.append((self.path, self.headers.get("Authorization")))
                if self.path in origin.redirects:
                    self.send_response(302)
                    self.send_header("Location", origin.redirects[self.path])
                    if self.path in origin.linked:
                        self.send_header("X-Linked-Etag", origin.linked[self.path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = origin.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                if self.headers.get("If-None-Match") == origin.etag:
                    self.send_response(304)
                    self.send_header("ETag", origin.etag)
                    self.end_headers()
                    return
                start = 0
                rng = self.headers.get("Range")
                if rng and rng.startswith("bytes="):
                    start = int(rng[6:].split("-")[0])
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                part = body[start:]
                self.send_header("ETag", origin.etag)
                self.send_header("Content-Length", str(len(part)))
                self.end_headers()
                if origin.barrier is not None:
                    origin.barrier.wait()
                if origin.hold is not None:
                    self.wfile.write(part[: origin.hold])
                    self.wfile.flush()
                    origin.release.wait(60)
                    self.close_connection = True
                    return
                if origin.cut is not None:
                    self.wfile.write(part[: origin.cut])
                    origin.cut = None
                    self.close_connection = True
                    return
                self.wfile.write(part)

        return H


def _serve(o: Origin, context: ssl.SSLContext | None = None) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), o.handler())
    if context:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"{'https' if context else 'http'}://127.0.0.1:{server.server_address[1]}"
    o.release.set()
    server.shutdown()
    server.server_close()


def _busybox_bin(tmp: Path) -> str:
    """A PATH of busybox applets with the real curl: what curlimages/curl runs."""
    busybox, curl = shutil.which("busybox"), shutil.which("curl")
    if not busybox or not curl:
        pytest.skip("busybox is not installed")
    bin_dir = tmp / "busybox-bin"
    bin_dir.mkdir()
    applets = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True)
    for name in applets.stdout.split():
        (bin_dir / name).symlink_to(busybox)
    (bin_dir / "curl").symlink_to(curl)
    return str(bin_dir)


Result = tuple[int, dict[str, Any], str]


def _env(tmp: Path, given: dict[str, str], shell: str, pod: str) -> dict[str, str]:
    log = tmp / f"termination-log-{pod}"
    log.unlink(missing_ok=True)
    env = {
        "PATH": shell,
        "LOADER_TERMINATION_LOG": str(log),
        "LOADER_POD_UID": pod,
        **given,
    }
    # The pod's /models is tmp/models here.
    for key in ("LOADER_DIR", "LOADER_PATH"):
        if env.get(key, "").startswith("/models"):
            env[key] = str(tmp) + env[key]
    return env


def _result(tmp: Path, pod: str, p: subprocess.CompletedProcess[str] | Any, out: str) -> Result:
    log = tmp / f"termination-log-{pod}"
    message = json.loads(log.read_text()) if log.exists() else {}
    return p.returncode, message, out


def run(
    tmp: Path, given: dict[str, str], shell: str = "/usr/bin:/bin", pod: str = "pod-a"
) -> Result:
    env = _env(tmp, given, shell, pod)
    p = subprocess.run(["sh", "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60)
    return _result(tmp, pod, p, p.stdout + p.stderr)


def start(tmp: Path, given: dict[str, str], shell: str, pod: str) -> subprocess.Popen[str]:
    """A loader in its own process group (a test may kill it as the kubelet would)."""
    return subprocess.Popen(
        ["sh", "-c", SCRIPT],
        env=_env(tmp, given, shell, pod),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _tls(where: Path) -> tuple[ssl.SSLContext, str]:
    """A server context with a self-signed certificate for 127.0.0.1, and its CA file."""
    openssl = shutil.which("openssl")
    if not openssl:
        pytest.skip("openssl is not installed")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        [
            *(openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context, str(cert)
