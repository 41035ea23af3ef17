#!/usr/bin/env bash
# Build llama.cpp b10068's llama-server with CUDA and run each GPU argv our controller
# renders (argv.json, from scripts/gpu-check/argv.py) on it. Runs on the device machine
# from the folder scripts/gpu-check/prepare.sh fills (.gpu/: this script, serve_each.py,
# argv.json, tiny.gguf, llama.cpp/), with the repository root as the working directory.
#
#   bash .gpu/run.sh                      build with CUDA (sm_90), then serve each argv
#   bash .gpu/run.sh --binary PATH --cpu  rehearsal: an existing (CPU) llama-server
#   bash .gpu/run.sh --no-cuda            rehearsal of the configure/build/timeout path
#
# Writes to $OUT (else .gpu/out): env.txt, configure.log, build.log, serve.txt,
# results.json, summary.json. Every step is bounded: the build by BUILD_LIMIT seconds
# (default 400), the whole script by BUDGET seconds from its start (default 520), so
# what it has is written before the caller's limit. LV: llama-server's -lv (default 4,
# which logs the offloaded layer count).
set -uo pipefail

DIR=$(cd "$(dirname "$0")" && pwd)
cd "$DIR/.." || exit 1
OUT=${OUT:-$DIR/out}
mkdir -p "$OUT"
T0=$(date +%s)
BUDGET=${BUDGET:-520}
BUILD_LIMIT=${BUILD_LIMIT:-400}
BUILD_DIR=${BUILD_DIR:-/tmp/llama-cuda-build}
BINARY=""
CPU=""
CUDA=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --binary) BINARY=$2; shift 2 ;;
        --cpu) CPU=--cpu; shift ;;
        --no-cuda) CUDA=0; shift ;;
        *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

build_status="skipped (--binary)"
build_s=0

summary() {
    python3 - "$OUT/summary.json" "$build_status" "$build_s" "$BINARY" "$(($(date +%s) - T0))" <<'EOF'
import json, sys
path, status, seconds, binary, total = sys.argv[1:6]
json.dump({"build": status, "build_s": int(seconds), "binary": binary,
           "total_s": int(total)}, open(path, "w"), indent=1)
EOF
}

# --- the machine -------------------------------------------------------------------
{
    echo "== date: $(date -u +%FT%TZ)"
    echo "== nvidia-smi -L"; nvidia-smi -L 2>&1 || echo "nvidia-smi: not found"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || true
    export PATH="$PATH:/usr/local/cuda/bin"
    echo "== nvcc --version"; nvcc --version 2>&1 || echo "nvcc: not found (also not in /usr/local/cuda/bin)"
    echo "== cmake --version"; cmake --version 2>&1 | head -1 || echo "cmake: not found"
    echo "== ninja --version"; ninja --version 2>&1 || echo "ninja: not found"
    echo "== c++ --version"; c++ --version 2>&1 | head -1
    echo "== nproc: $(nproc)"
} | tee "$OUT/env.txt"
export PATH="$PATH:/usr/local/cuda/bin"

# --- the build ---------------------------------------------------------------------
if [[ -z "$BINARY" ]]; then
    gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    cuda_flags=(-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90)
    [[ $CUDA == 1 ]] || cuda_flags=(-DGGML_CUDA=OFF)
    start=$(date +%s)
    # The flags of scripts/build-llama-server.sh, plus CUDA for sm_90 (the H200/H100).
    if ! timeout 120 cmake -S "$DIR/llama.cpp" -B "$BUILD_DIR" "${gen[@]}" \
        -DCMAKE_BUILD_TYPE=Release "${cuda_flags[@]}" -DLLAMA_CURL=OFF \
        -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DBUILD_SHARED_LIBS=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
        -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
        -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_NUMBER=10068 >"$OUT/configure.log" 2>&1; then
        build_status="configure failed"
        tail -30 "$OUT/configure.log"
        summary
        exit 1
    fi
    timeout "$BUILD_LIMIT" cmake --build "$BUILD_DIR" --target llama-server -j "$(nproc)" \
        >"$OUT/build.log" 2>&1
    rc=$?
    build_s=$(($(date +%s) - start))
    BINARY="$BUILD_DIR/bin/llama-server"
    if [[ $rc == 124 ]]; then
        build_status="timed out after ${BUILD_LIMIT} s"
    elif [[ $rc != 0 ]]; then
        build_status="failed (exit $rc)"
    else
        build_status="ok"
    fi
    echo "== build: $build_status in ${build_s} s"
    if [[ $build_status != ok ]]; then
        grep -E "error|Error" "$OUT/build.log" | head -20
        tail -20 "$OUT/build.log"
        summary
        exit 1
    fi
fi

# --- each argv ---------------------------------------------------------------------
{
    echo "== $BINARY --version"; timeout 30 "$BINARY" --version 2>&1
    echo "== --list-devices"; timeout 30 "$BINARY" --list-devices 2>&1
    echo "== ldd (cuda)"; ldd "$BINARY" 2>&1 | grep -Ei "cuda|cublas" || echo "(none)"
} | tee -a "$OUT/env.txt"
left=$((BUDGET - ($(date +%s) - T0)))
timeout "$((left > 20 ? left : 20))" python3 "$DIR/serve_each.py" "$BINARY" "$DIR/argv.json" \
    "$OUT/results.json" --deadline "$((T0 + BUDGET - 5))" --lv "${LV:-4}" $CPU 2>&1 | tee "$OUT/serve.txt"
serve_rc=${PIPESTATUS[0]}
summary
exit "$serve_rc"
