"""model-cache-prep and the loader run for real (sh, chown, curl) as their containers run
them: the prep as root with only CHOWN and FOWNER, the loader as the curl image's user
(uid 100, gid 101) in the pod's fsGroup. The cache folder is left as a CSI driver with
`fsGroupPolicy: None` leaves it (owned by someone else, 0755): without the prep the
loader cannot create its cacheKey folder; after it, the loader stages the file.

Needs root (to own files as other users) and util-linux's setpriv; skipped otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from api import parse_model
from reconcilers.sources.cache_prep import cache_prep_container
from reconcilers.sources.loader import MODEL_DIR, WeightsVolume, loader_for

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to run the prep and the loader as their users",
)
BODY = b"GGUF" + bytes(range(256)) * 16
LOADER_USER = ("100", "101")  # curlimages/curl's curl_user and its group
FS_GROUP = 102


@pytest.fixture
def origin() -> Iterator[str]:
    class H(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()
            self.wfile.write(BODY)

    server = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def claim() -> Iterator[Path]:
    """The claim's root as a fsGroup-ignoring CSI driver leaves it: another owner, 0755
    (a folder every user may reach, unlike pytest's 0700 tmp_path)."""
    base = Path(tempfile.mkdtemp(prefix="llmkube-claim-"))
    base.chmod(0o755)
    root = base / "models"
    root.mkdir(mode=0o755)
    os.chown(root, 4242, 4242)
    yield root
    shutil.rmtree(base)


def run(
    container: Any, claim: Path, *setpriv: str, **extra: str
) -> subprocess.CompletedProcess[str]:
    """The container's command under sh, its env with /models mapped to the claim."""
    env = {"PATH": "/usr/bin:/bin", **extra}
    for e in container.get("env") or ():
        if "value" in e:
            env[e["name"]] = e["value"].replace(MODEL_DIR, str(claim), 1)
    assert container["command"][:2] == ["sh", "-c"]
    return subprocess.run(
        ["setpriv", *setpriv, "sh", "-c", container["command"][2]],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def as_root(groups: str) -> tuple[str, ...]:
    """Root with only CHOWN and FOWNER, in the pod's fsGroup if it has one (the kubelet
    adds it to every container's groups)."""
    return ("--bounding-set=-all,+chown,+fowner", "--inh-caps=-all", f"--groups={groups}")


def runtime_reads(path: Path) -> bool:
    """Whether another user, in no group of ours (a runtime), reads the staged file."""
    read = ["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "cat", str(path)]
    return subprocess.run(read, capture_output=True, timeout=10).stdout == BODY


def as_loader(groups: str) -> tuple[str, ...]:
    uid, gid = LOADER_USER
    return (f"--reuid={uid}", f"--regid={gid}", f"--groups={groups}", "--inh-caps=-all")


def loader(url: str) -> Any:
    model = parse_model({"source": f"{url}/model.gguf"})
    loading = loader_for(model, WeightsVolume("llmkube-model-cache"), "llamacpp")
    assert loading is not None
    return model, loading.container


def stage(claim: Path, url: str, groups: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    model, container = loader(url)
    log = claim.parent / "termination-log"
    log.touch()
    log.chmod(0o666)
    done = run(container, claim, *as_loader(groups), LOADER_TERMINATION_LOG=str(log))
    return done, claim / model.cache_key / "model.gguf"


def test_the_loader_cannot_write_a_claim_the_csi_driver_left_alone(
    claim: Path, origin: str
) -> None:
    done, staged = stage(claim, origin, str(FS_GROUP))
    assert done.returncode != 0 and not staged.exists()
    assert "Permission denied" in done.stderr, done.stderr


def test_after_the_prep_the_loader_in_the_fsgroup_stages_the_file(claim: Path, origin: str) -> None:
    prep = run(cache_prep_container("model-cache", FS_GROUP), claim, *as_root(str(FS_GROUP)))
    assert prep.returncode == 0, prep.stderr
    st = claim.stat()
    assert (st.st_uid, st.st_gid) == (0, FS_GROUP)
    assert oct(st.st_mode & 0o7777) == oct(0o2775), "group rwx and setgid, others r-x"
    done, staged = stage(claim, origin, str(FS_GROUP))
    assert done.returncode == 0, done.stdout + done.stderr
    assert staged.read_bytes() == BODY
    assert staged.parent.stat().st_gid == FS_GROUP, "setgid: the cache folder keeps the group"
    assert runtime_reads(staged)
    report = json.loads((claim.parent / "termination-log").read_text())
    assert report["size"] == str(len(BODY))


def test_without_an_fsgroup_the_prep_lets_any_loader_user_in(claim: Path, origin: str) -> None:
    prep = run(cache_prep_container("model-cache", None), claim, *as_root("0"))
    assert prep.returncode == 0, prep.stderr
    assert oct(claim.stat().st_mode & 0o7777) == oct(0o1777)
    done, staged = stage(claim, origin, LOADER_USER[1])
    assert done.returncode == 0, done.stdout + done.stderr
    assert staged.read_bytes() == BODY and runtime_reads(staged)


def test_the_prep_needs_chown_and_fowner_only_and_fails_without_them(claim: Path) -> None:
    no_caps = ("--bounding-set=-all", "--inh-caps=-all", f"--groups={FS_GROUP}")
    prep = run(cache_prep_container("model-cache", FS_GROUP), claim, *no_caps)
    assert prep.returncode != 0, "chown of another user's folder needs CAP_CHOWN"
    assert claim.stat().st_uid == 4242
