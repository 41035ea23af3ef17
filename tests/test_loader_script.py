"""The loader's shell script, run for real (sh, curl, sha256sum) against a local HTTP server:
download, sha256 match and mismatch, resume, cache reuse, OnChange revalidation, and the
termination message it writes."""

from __future__ import annotations

import hashlib
import json
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from reconcilers.sources.loader import SCRIPT

BODY = b"GGUF" + bytes(range(256)) * 64
SUM = hashlib.sha256(BODY).hexdigest()


class Origin:
    """Serves /model.gguf and /b.bin with ETag, If-None-Match and Range; counts GETs."""

    def __init__(self) -> None:
        self.files = {"/model.gguf": BODY, "/b.bin": b"second file"}
        self.etag = '"v1"'
        self.gets: list[tuple[str, str | None]] = []  # (path, Range)
        self.cut: int | None = None  # stop a response after this many bytes

    def handler(self) -> type[BaseHTTPRequestHandler]:
        origin = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                body = origin.files.get(self.path)
                origin.gets.append((self.path, self.headers.get("Range")))
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
                if origin.cut is not None:
                    self.wfile.write(part[: origin.cut])
                    origin.cut = None
                    self.close_connection = True
                    return
                self.wfile.write(part)

        return H


@pytest.fixture
def origin() -> Iterator[tuple[Origin, str]]:
    o = Origin()
    server = ThreadingHTTPServer(("127.0.0.1", 0), o.handler())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield o, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def run(tmp: Path, files: str, **env: str) -> tuple[int, dict[str, Any], str]:
    log = tmp / "termination-log"
    log.unlink(missing_ok=True)
    full = {
        "PATH": "/usr/bin:/bin",
        "LOADER_TERMINATION_LOG": str(log),
        "LOADER_DIR": str(tmp / "cache" / "key1"),
        "LOADER_PATH": "/models/key1/model.gguf",
        "LOADER_CACHE_KEY": "key1",
        "LOADER_FILES": files,
        **env,
    }
    p = subprocess.run(["sh", "-c", SCRIPT], env=full, capture_output=True, text=True, timeout=60)
    message = json.loads(log.read_text()) if log.exists() else {}
    return p.returncode, message, p.stdout + p.stderr


def test_download_verifies_sha256_and_reports(tmp_path: Path, origin: tuple[Origin, str]) -> None:
    o, url = origin
    rc, msg, out = run(tmp_path, f"{url}/model.gguf model.gguf", LOADER_SHA256=SUM)
    assert rc == 0, out
    assert msg == {
        "cacheKey": "key1",
        "path": "/models/key1/model.gguf",
        "size": str(len(BODY)),
        "sha256": SUM,
        "stagedFiles": ["model.gguf"],
        "downloaded": ["model.gguf"],
        "sourceETag": '"v1"',
    }
    assert (tmp_path / "cache/key1/model.gguf").read_bytes() == BODY
    # A second replica (or a restart) reuses the cached file: no request at all.
    o.gets.clear()
    rc, msg, out = run(tmp_path, f"{url}/model.gguf model.gguf", LOADER_SHA256=SUM)
    assert rc == 0, out
    assert o.gets == []
    assert msg["downloaded"] == [] and msg["sha256"] == SUM and msg["stagedFiles"] == ["model.gguf"]


def test_sha256_mismatch_fails_and_leaves_no_file(
    tmp_path: Path, origin: tuple[Origin, str]
) -> None:
    _, url = origin
    wrong = "0" * 64
    rc, msg, out = run(tmp_path, f"{url}/model.gguf model.gguf", LOADER_SHA256=wrong)
    assert rc == 1, out
    assert msg == {
        "cacheKey": "key1",
        "error": "Sha256Mismatch",
        "file": "model.gguf",
        "expected": wrong,
        "actual": SUM,
    }
    left = sorted(p.name for p in (tmp_path / "cache/key1").iterdir())
    assert "model.gguf" not in left and "model.gguf.part" not in left, left


def test_cached_file_with_another_digest_is_not_used(
    tmp_path: Path, origin: tuple[Origin, str]
) -> None:
    _, url = origin
    assert run(tmp_path, f"{url}/model.gguf model.gguf")[0] == 0
    rc, msg, _ = run(tmp_path, f"{url}/model.gguf model.gguf", LOADER_SHA256="1" * 64)
    assert rc == 1 and msg["error"] == "Sha256Mismatch" and msg["actual"] == SUM


def test_a_part_left_by_a_killed_loader_is_resumed(
    tmp_path: Path, origin: tuple[Origin, str]
) -> None:
    o, url = origin
    part = tmp_path / "cache/key1/model.gguf.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(BODY[:1000])  # what a restarted init container finds
    rc, msg, out = run(tmp_path, f"{url}/model.gguf model.gguf", LOADER_SHA256=SUM)
    assert rc == 0, out
    assert o.gets == [("/model.gguf", "bytes=1000-")]
    assert (tmp_path / "cache/key1/model.gguf").read_bytes() == BODY
    assert msg["sha256"] == SUM


def test_a_cut_transfer_is_fetched_again(tmp_path: Path, origin: tuple[Origin, str]) -> None:
    o, url = origin
    o.cut = 1000
    rc, msg, out = run(tmp_path, f"{url}/model.gguf model.gguf", LOADER_SHA256=SUM)
    assert rc == 0, out
    assert len(o.gets) == 2 and msg["sha256"] == SUM


def test_several_files_and_download_failure(tmp_path: Path, origin: tuple[Origin, str]) -> None:
    _, url = origin
    files = f"{url}/model.gguf model.gguf\n{url}/b.bin sub/b.bin"
    rc, msg, out = run(tmp_path, files)
    assert rc == 0, out
    assert msg["stagedFiles"] == ["model.gguf", "sub/b.bin"]
    assert (tmp_path / "cache/key1/sub/b.bin").read_bytes() == b"second file"
    rc, msg, _ = run(tmp_path, f"{files}\n{url}/missing.bin missing.bin")
    assert rc == 1 and msg["error"] == "DownloadFailed" and msg["file"] == "missing.bin"


def test_on_change_revalidates_with_the_etag(tmp_path: Path, origin: tuple[Origin, str]) -> None:
    o, url = origin
    files = f"{url}/model.gguf model.gguf"
    assert run(tmp_path, files, LOADER_REFRESH="OnChange")[0] == 0
    o.gets.clear()
    rc, msg, out = run(tmp_path, files, LOADER_REFRESH="OnChange")
    assert rc == 0, out
    assert len(o.gets) == 1 and msg["downloaded"] == []  # 304: kept
    # The source changes: a new ETag, a new body, downloaded and reported.
    o.files["/model.gguf"] = b"new weights"
    o.etag = '"v2"'
    rc, msg, out = run(tmp_path, files, LOADER_REFRESH="OnChange")
    assert rc == 0, out
    assert msg["downloaded"] == ["model.gguf"] and msg["sourceETag"] == '"v2"'
    assert msg["sha256"] == hashlib.sha256(b"new weights").hexdigest()
    assert (tmp_path / "cache/key1/model.gguf").read_bytes() == b"new weights"
    # IfNotPresent never asks again.
    o.gets.clear()
    assert run(tmp_path, files)[0] == 0 and o.gets == []
