"""The node tier's images (devcluster/images), without a node: the OCI archives containerd
imports, the names the product writes, and the serving stand-in's answers."""

from __future__ import annotations

import gzip
import hashlib
import json
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from devcluster.images import build, oci
from devcluster.images.controller import image_name
from reconcilers.sources.loader import LOADER_IMAGE
from runtimes.images import PINS
from tests.support.paths import REPO


def _rootfs(tmp_path: Path) -> Path:
    root = tmp_path / "rootfs"
    (root / "bin").mkdir(parents=True)
    (root / "bin/tool").write_text("#!/bin/sh\necho hi\n")
    (root / "bin/tool").chmod(0o755)
    (root / "bin/alias").symlink_to("tool")
    (root / "dev/null-ish").mkdir(parents=True)
    return root


def test_layer_is_reproducible_and_its_diff_id_is_the_plain_tar(tmp_path: Path) -> None:
    root = _rootfs(tmp_path)
    first, second = oci.pack_layer(root), oci.pack_layer(root)
    assert first == second
    plain = gzip.decompress(first.blob.data)
    assert first.diff_id == "sha256:" + hashlib.sha256(plain).hexdigest()
    with tarfile.open(fileobj=__import__("io").BytesIO(plain)) as tar:
        names = {m.name: m for m in tar.getmembers()}
    assert names["bin/alias"].issym() and names["bin/alias"].linkname == "tool"
    assert names["bin/tool"].mode & 0o777 == 0o755 and names["bin/tool"].mtime == 0
    # What the runtime mounts is not packed below its mount point.
    assert "dev" in names and "dev/null-ish" not in names


def test_image_tar_names_the_image_and_holds_every_blob(tmp_path: Path) -> None:
    root = _rootfs(tmp_path)
    img = oci.image([oci.pack_layer(root)], oci.ImageConfig(entrypoint=["/bin/tool"], user="100"))
    tar_path = oci.write_tar(img, "docker.io/curlimages/curl:8.18.0", tmp_path / "x.tar")
    with tarfile.open(tar_path) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    index = json.loads(files["index.json"])
    (entry,) = index["manifests"]
    assert entry["annotations"][oci.NAME_ANNOTATION] == "docker.io/curlimages/curl:8.18.0"
    assert entry["platform"]["os"] == "linux"
    manifest = json.loads(files[f"blobs/sha256/{entry['digest'].removeprefix('sha256:')}"])
    for desc in [manifest["config"], *manifest["layers"]]:
        blob = files[f"blobs/sha256/{desc['digest'].removeprefix('sha256:')}"]
        assert len(blob) == desc["size"]
        assert "sha256:" + hashlib.sha256(blob).hexdigest() == desc["digest"]
    config = json.loads(files[f"blobs/sha256/{manifest['config']['digest'][7:]}"])
    assert config["config"]["Entrypoint"] == ["/bin/tool"] and config["config"]["User"] == "100"
    assert config["rootfs"]["diff_ids"] == [img.layers[0].diff_id]


@pytest.mark.parametrize(
    ("name", "full"),
    [
        ("curlimages/curl:8.18.0", "docker.io/curlimages/curl:8.18.0"),
        ("python:3.11-slim", "docker.io/library/python:3.11-slim"),
        ("ghcr.io/ggml-org/llama.cpp:server-b10068", "ghcr.io/ggml-org/llama.cpp:server-b10068"),
        ("localhost/x:1", "localhost/x:1"),
    ],
)
def test_names_are_normalised_as_containerd_does(name: str, full: str) -> None:
    assert oci.full_name(name) == full


def test_the_images_are_the_names_the_product_writes() -> None:
    assert build.LOADER_IMAGE == LOADER_IMAGE
    assert set(build.LLAMA_CPP_IMAGES) == {PINS["llamacpp"]["cpu"], PINS["llamacpp"]["cuda"]}
    assert set(build.STANDIN_IMAGES) == {
        PINS["vllm"]["cuda"],
        PINS["sglang"]["cuda"],
        PINS["tgi"]["cuda"],
    }
    chart = yaml.safe_load((REPO / "charts/llmkube/Chart.yaml").read_text())
    values = yaml.safe_load((REPO / "charts/llmkube/values.yaml").read_text())
    assert image_name() == f"{values['image']['repository']}:{chart['appVersion']}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=2) as r:
        return bytes(r.read())


@pytest.mark.parametrize(
    ("program", "argv", "host"),
    [
        ("vllm", ["serve", "/models/m", "--tensor-parallel-size", "2"], "127.0.0.1"),
        ("sglang", ["--model-path", "/models/m"], "127.0.0.1"),
        ("tgi", ["--model-id", "/models/m"], "::1"),
    ],
)
def test_standin_answers_health_and_records_its_argv(
    program: str, argv: list[str], host: str
) -> None:
    port = _free_port()
    host_flag = "--hostname" if program == "tgi" else "--host"
    args = [*argv, "--port", str(port), f"{host_flag}={host}"]
    server = REPO / "devcluster/images/standin_server.py"
    proc = subprocess.Popen(
        [sys.executable, str(server), program, *args], stdout=subprocess.PIPE, text=True
    )
    try:
        first = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
        assert first["argv"] == args and first["standin"] is True
        at = f"[{host}]" if ":" in host else host
        deadline = time.monotonic() + 10
        while True:
            try:
                assert _get(f"http://{at}:{port}/health") == b"ok"
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        seen = json.loads(_get(f"http://{at}:{port}/standin"))
        assert seen["argv"] == args and seen["program"] == program
        assert {"CapEff", "NoNewPrivs", "Seccomp"} <= set(seen["status"])
        assert any(m["path"] == "/" for m in seen["mounts"])
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_standin_keeps_the_runtimes_default_address() -> None:
    """SGLang listens on 127.0.0.1:30000 unless told: a pod whose argv forgets --host
    fails its probes, as the real one would."""
    from devcluster.images import standin_server

    assert standin_server.DEFAULTS["sglang"] == ("127.0.0.1", 30000)
    assert standin_server.flag(["--port=9"], "--port") == "9"
    assert standin_server.flag(["--port", "9"], "--port") == "9"
    assert standin_server.flag(["--portx", "9"], "--port") is None
