"""The controller image, built from the project's Dockerfile by BuildKit (buildkitd with
its runc worker, driven by buildctl), as a user's `docker build` would build it.

`FROM python:3.11-slim` is given as a named build context: a local OCI layout of Debian's
Python (rootfs.debian_python), so nothing comes from a registry. It differs from the
official python:3.11-slim in two ways that the Dockerfile's steps need, both said here:
Debian's EXTERNALLY-MANAGED marker is removed (the official image has none, and pip
refuses without that), and it carries this machine's CA bundle (pip in a RUN step reaches
the package index through this machine's TLS-intercepting proxy). buildkitd runs on the
host network only for the build (pip downloads the product's dependencies).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

import devcluster.images.oci as oci
import devcluster.images.rootfs as rootfs

from ..node import binaries_dir
from .cache import ROOT, Built, _cached, _digest_of
from .rootfs import ImageBuildError

BASE_NAME = "docker.io/library/python:3.11-slim"
BASE_CONTEXT = "python:3.11-slim"
REPOSITORY = "ghcr.io/llmkube/llmkube-py"
# What the Dockerfile copies (its context): a change in any of them rebuilds the image.
CONTEXT = (
    "Dockerfile",
    ".dockerignore",
    "pyproject.toml",
    "README.md",
    "objtypes.py",
    "api",
    "app",
    "controller",
    "reconcilers",
    "runtimes",
    "metrics",
    "webhook",
)
BUILD_TIMEOUT = 900.0


def image_name() -> str:
    """The image the chart's Deployment names by default: the repository at appVersion."""
    chart = yaml.safe_load((ROOT / "charts/llmkube/Chart.yaml").read_text())
    return f"{REPOSITORY}:{chart['appVersion']}"


def base_layout(dest: Path, python: Path) -> tuple[Path, str]:
    """The python:3.11-slim stand-in as an OCI layout; returns it and its manifest digest."""
    layout = dest / "python-3.11-slim-layout"
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        root = Path(tmp) / "rootfs"
        rootfs.copy_tree(python, root)
        for marker in root.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
            marker.unlink()
        shutil.copy2(rootfs.HOST_CA_BUNDLE, root / "etc/ssl/certs/ca-certificates.crt")
        (root / "usr/local/bin/python").symlink_to("/usr/bin/python3")
        config = oci.ImageConfig(
            cmd=["python3"],
            env=[*oci.ImageConfig().env, "LANG=C.UTF-8"],
            labels={"dev.llmkube.stand-in": "Debian bookworm's Python 3.11 for python:3.11-slim"},
        )
        img = oci.image([oci.pack_layer(root)], config)
    shutil.rmtree(layout, ignore_errors=True)
    return layout, oci.write_layout(img, BASE_NAME, layout)


class BuildKit:
    """buildkitd as root with the runc worker, its state under `state`."""

    def __init__(self, bin_dir: Path, state: Path) -> None:
        self.bin_dir = bin_dir
        self.state = state
        self.socket = Path(tempfile.mkdtemp(prefix="lkb-", dir="/tmp")) / "buildkitd.sock"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> BuildKit:
        self.state.mkdir(parents=True, exist_ok=True)
        log = (self.state / "buildkitd.log").open("wb")
        env = {**os.environ, "PATH": f"{self.bin_dir}:{os.environ.get('PATH', '')}"}
        self.proc = subprocess.Popen(
            [
                str(self.bin_dir / "buildkitd"),
                "--root",
                str(self.state / "root"),
                "--addr",
                f"unix://{self.socket}",
                "--containerd-worker=false",
                "--oci-worker=true",
                "--oci-worker-binary",
                str(self.bin_dir / "runc"),
                "--oci-worker-net",
                "host",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while self.buildctl("debug", "workers", check=False).returncode != 0:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                tail = (self.state / "buildkitd.log").read_text()[-2000:]
                raise ImageBuildError(f"buildkitd did not start: {tail}")
            time.sleep(0.3)
        return self

    def buildctl(
        self, *args: str, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.bin_dir / "buildctl"), "--addr", f"unix://{self.socket}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise ImageBuildError(f"buildctl {args[0]}: {done.stderr.strip()[-3000:]}")
        return done

    def __exit__(self, *_: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.socket.parent, ignore_errors=True)


def controller_image(dest: Path, python: Path) -> Built:
    """The Dockerfile built into dest/controller.tar, named as the chart names it."""
    name = image_name()
    bin_dir = binaries_dir()
    for tool in ("buildkitd", "buildctl", "runc"):
        if not os.access(bin_dir / tool, os.X_OK):
            raise ImageBuildError(f"{bin_dir / tool} missing (make node-binaries builds it)")
    inputs = [ROOT / p for p in CONTEXT if (ROOT / p).exists()]
    key = _digest_of([*inputs, python / ".debootstrap-done", Path(__file__)]) + name

    def make(tar: Path) -> None:
        layout, digest = base_layout(dest, python)
        tmp = tar.with_name(f".{tar.name}.{os.getpid()}.tmp")
        with BuildKit(bin_dir, dest / "buildkit") as kit:
            kit.buildctl(
                "build",
                "--frontend",
                "dockerfile.v0",
                "--local",
                f"context={ROOT}",
                "--local",
                f"dockerfile={ROOT}",
                "--oci-layout",
                f"base={layout}",
                "--opt",
                f"context:{BASE_CONTEXT}=oci-layout://base@{digest}",
                "--output",
                f"type=oci,dest={tmp},name={name}",
                timeout=BUILD_TIMEOUT,
            )
        tmp.replace(tar)

    return Built(name, _cached(dest, "controller", key, make))
