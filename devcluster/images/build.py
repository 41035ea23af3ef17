"""The node tier's images, built here without a registry and saved as OCI tars that the
real node imports into containerd under the exact names the product writes (so
`imagePullPolicy: IfNotPresent` never pulls). Each tar is rebuilt only when its inputs
change (a key of their digests is kept next to it).

| image (as the product names it)                  | what it holds                                |
|--------------------------------------------------|----------------------------------------------|
| registry.k8s.io/pause:3.10                       | a static C pause (containerd's sandbox)      |
| curlimages/curl:8.18.0                           | Debian's curl and its libraries, busybox     |
| ghcr.io/ggml-org/llama.cpp:server-b10068         | the CPU llama-server b10068 (make            |
|                                                  | llama-server) and its libraries              |
| ghcr.io/ggml-org/llama.cpp:server-cuda-b10068    | STAND-IN: the same CPU build under the CUDA  |
|                                                  | image's name (a GPU Model's pods use it)     |
| vllm/vllm-openai:v0.34.0, lmsysorg/sglang:v0.5.23, | STAND-IN (standin_server.py): records what |
| ghcr.io/huggingface/text-generation-inference:3.3.6 | the kubelet gave it, answers /health     |
| ghcr.io/llmkube/llmkube-py:<appVersion>          | the Dockerfile, built by BuildKit            |
|                                                  | (controller.py)                              |
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import devcluster.images.oci as oci
import devcluster.images.rootfs as rootfs

from ..process import script_path
from .cache import HERE, ROOT, Built, _cached, _digest_of
from .controller import controller_image
from .rootfs import ImageBuildError

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
# The names the product writes (devcluster imports no product package:
# tests/unit/test_oci_images.py checks these against reconcilers/ and runtimes/).
LOADER_IMAGE = "curlimages/curl:8.18.0"
STANDIN_LABEL = "dev.llmkube.stand-in"
LLAMA_CPP_IMAGES = (
    "ghcr.io/ggml-org/llama.cpp:server-b10068",
    "ghcr.io/ggml-org/llama.cpp:server-cuda-b10068",
)
# The serving stand-in under each runtime's CUDA image, with that image's entrypoint
# (the product renders vLLM's and SGLang's command itself, TGI's comes from the image).
STANDIN_IMAGES = {
    "vllm/vllm-openai:v0.34.0": ["vllm", "serve"],
    "lmsysorg/sglang:v0.5.23": [],
    "ghcr.io/huggingface/text-generation-inference:3.3.6": ["text-generation-launcher"],
}
CURL_USER = "curl_user:x:100:102:curl:/home/curl_user:/bin/sh"
CURL_GROUP = "curl_group:x:102:curl_user"


def _write(tar: Path, name: str, root: Path, config: oci.ImageConfig) -> None:
    img = oci.image([oci.pack_layer(root)], config)
    oci.write_tar(img, oci.full_name(name), tar)


def _pause(dest: Path) -> Built:
    source = HERE / "pause.c"

    def make(tar: Path) -> None:
        with tempfile.TemporaryDirectory(dir=dest) as tmp:
            root = Path(tmp) / "rootfs"
            root.mkdir()
            rootfs.run(["gcc", "-static", "-O2", "-s", "-o", str(root / "pause"), str(source)])
            _write(
                tar, PAUSE_IMAGE, root, oci.ImageConfig(entrypoint=["/pause"], user="65535:65535")
            )

    return Built(PAUSE_IMAGE, _cached(dest, "pause", _digest_of([source]), make))


def _loader(dest: Path) -> Built:
    curl = Path(shutil.which("curl") or "/usr/bin/curl")

    def make(tar: Path) -> None:
        with tempfile.TemporaryDirectory(dir=dest) as tmp:
            root = Path(tmp) / "rootfs"
            rootfs.skeleton(root, [CURL_USER], [CURL_GROUP])
            (root / "home/curl_user").mkdir(parents=True)
            os.chown(root / "home/curl_user", 100, 102)
            rootfs.busybox(root)
            rootfs.install_binary(root, curl, "/usr/bin/curl")
            certs = root / "etc/ssl/certs"
            certs.mkdir(parents=True)
            shutil.copy2(rootfs.HOST_CA_BUNDLE, certs / "ca-certificates.crt")
            config = oci.ImageConfig(
                entrypoint=["/entrypoint.sh"],
                cmd=["curl"],
                user="curl_user",
                labels={STANDIN_LABEL: "Debian's curl, not the curlimages build"},
            )
            (root / "entrypoint.sh").write_text('#!/bin/sh\nexec "$@"\n')
            (root / "entrypoint.sh").chmod(0o755)
            _write(tar, LOADER_IMAGE, root, config)

    key = _digest_of([curl.resolve(), rootfs.BUSYBOX, rootfs.HOST_CA_BUNDLE, Path(__file__)])
    return Built(LOADER_IMAGE, _cached(dest, "loader", key, make))


def llama_server_binary() -> Path:
    return script_path(ROOT / "scripts/build-llama-server.sh")


def _llama_cpp(dest: Path) -> list[Built]:
    binary = llama_server_binary()
    if not binary.is_file():
        raise ImageBuildError(f"{binary} missing (make llama-server builds it)")
    built = []
    for name in LLAMA_CPP_IMAGES:
        cuda = "-cuda-" in name
        labels = {STANDIN_LABEL: "the CPU llama-server under the CUDA image's name"} if cuda else {}

        def make(tar: Path, name: str = name, labels: dict[str, str] = labels) -> None:
            with tempfile.TemporaryDirectory(dir=dest) as tmp:
                root = Path(tmp) / "rootfs"
                rootfs.skeleton(root, [], [])
                rootfs.busybox(root)
                rootfs.install_binary(root, binary, "/app/llama-server")
                config = oci.ImageConfig(
                    entrypoint=["/app/llama-server"],
                    workdir="/app",
                    labels=labels,
                    env=[*oci.ImageConfig().env, "LLAMA_ARG_HOST=0.0.0.0"],
                )
                _write(tar, name, root, config)

        slug = "llama-cpp-cuda" if cuda else "llama-cpp"
        key = _digest_of([binary, rootfs.BUSYBOX, Path(__file__)]) + name
        built.append(Built(name, _cached(dest, slug, key, make)))
    return built


def python_rootfs(dest: Path) -> Path:
    """The Debian Python rootfs both the stand-in and the controller's base start from."""
    return rootfs.debian_python(dest / "debian-python")


def _standins(dest: Path) -> list[Built]:
    base = python_rootfs(dest)
    server = HERE / "standin_server.py"
    key = _digest_of([server, Path(__file__), base / ".debootstrap-done"])
    layer: list[oci.Layer] = []

    def the_layer() -> oci.Layer:
        if not layer:
            with tempfile.TemporaryDirectory(dir=dest) as tmp:
                root = Path(tmp) / "rootfs"
                rootfs.copy_tree(base, root)
                (root / "opt/standin").mkdir(parents=True)
                shutil.copy2(server, root / "opt/standin/standin_server.py")
                for program, cmd in (("vllm", "vllm"), ("tgi", "text-generation-launcher")):
                    wrapper = root / "usr/local/bin" / cmd
                    wrapper.write_text(
                        f'#!/bin/sh\nexec python3 /opt/standin/standin_server.py {program} "$@"\n'
                    )
                    wrapper.chmod(0o755)
                sglang = root / "usr/local/lib/python3.11/dist-packages/sglang"
                sglang.mkdir(parents=True)
                (sglang / "__init__.py").write_text('"""Stand-in, not SGLang."""\n')
                (sglang / "launch_server.py").write_text(
                    "import runpy, sys\n"
                    "sys.argv = ['standin', 'sglang', *sys.argv[1:]]\n"
                    "runpy.run_path('/opt/standin/standin_server.py', run_name='__main__')\n"
                )
                layer.append(oci.pack_layer(root))
        return layer[0]

    built = []
    for name, entrypoint in STANDIN_IMAGES.items():

        def make(tar: Path, name: str = name, entrypoint: list[str] = entrypoint) -> None:
            config = oci.ImageConfig(
                entrypoint=entrypoint,
                env=[*oci.ImageConfig().env, "PORT=80"]
                if "text-generation" in name
                else oci.ImageConfig().env,
                labels={STANDIN_LABEL: "devcluster/images/standin_server.py, not the runtime"},
            )
            oci.write_tar(oci.image([the_layer()], config), oci.full_name(name), tar)

        slug = "standin-" + name.split("/")[-1].split(":")[0]
        built.append(Built(name, _cached(dest, slug, key + name, make)))
    return built


def build_images(dest: Path, *, controller: bool = True) -> list[Path]:
    """Every image tar of the node tier (the controller image too unless told not),
    built into dest where missing or stale."""
    dest.mkdir(parents=True, exist_ok=True)
    built = [_pause(dest), _loader(dest), *_llama_cpp(dest), *_standins(dest)]
    if controller:
        built.append(controller_image(dest, python_rootfs(dest)))
    (dest / "images.json").write_text(
        json.dumps({b.name: str(b.tar) for b in built}, indent=2, sort_keys=True)
    )
    return [b.tar for b in built]
