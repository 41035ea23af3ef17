#!/usr/bin/env bash
# Build what a real node of the node test tier runs (devcluster/node.py), from Go modules
# at pinned versions, and cache it next to the control plane's binaries:
#   runc, containerd + ctr + containerd-shim-runc-v2, the CNI plugins (bridge, host-local,
#   loopback, portmap), crictl, the kubelet, kube-proxy and kubectl at K8S_VERSION, the DRA
#   example driver's kubelet plugin, the helm CLI, BuildKit (buildkitd, buildctl: they
#   build the controller image from the Dockerfile), CoreDNS (the cluster DNS) and
#   Prometheus (with the Kubernetes service discovery Debian's build leaves out).
#
#   scripts/build-node.sh          prints the binaries' folder (builds them once)
#   scripts/build-node.sh --path   prints where the folder is or would be; no build
#
# As root, it first installs the Debian packages the build and the node need
# (libseccomp-dev and pkg-config for runc's seccomp, busybox-static and debootstrap for the
# images, iptables for kube-proxy and CNI portmap, curl). Only the Go module proxy and the
# machine's apt sources are used.
#
# Each module is built inside a writable copy of its own released module (its go.mod, with
# its replace and exclude lines, is the one that counts), except the Kubernetes commands
# (scripts/lib/kube-module.sh) and the DRA example driver, whose version list the module
# proxy refuses: a small module requiring that one version builds it.
#
# Idempotent: binaries already in the folder are kept. One build at a time (flock).
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-1.34.4}"
K8S_VERSION="${K8S_VERSION#v}"
[[ "$K8S_VERSION" =~ ^1\.[0-9]+\.[0-9]+$ ]] || {
    echo "build-node: K8S_VERSION must be 1.MINOR.PATCH, not '$K8S_VERSION'" >&2
    exit 2
}
RUNC_VERSION=1.5.3
CONTAINERD_VERSION=2.2.9
CNI_VERSION=1.9.1
CRICTL_VERSION=1.34.0
DRA_DRIVER_VERSION=0.2.1
HELM_VERSION=4.3.2
BUILDKIT_VERSION=0.26.3
# Prometheus 2.53 LTS (module v0.53.x): Debian's build leaves out kubernetes_sd_configs,
# the service discovery users without the Prometheus Operator configure.
PROMETHEUS_VERSION=0.53.3
COREDNS_VERSION=1.12.1  # the CoreDNS Kubernetes 1.34 installs (kubeadm's constants)
DEBIAN_PACKAGES=(libseccomp-dev pkg-config busybox-static debootstrap iptables curl)

. "$(dirname "$0")/lib/kube-module.sh"

CACHE_ROOT="${XDG_CACHE_HOME:-$HOME/.cache}/llmkube-py"
DEST="$CACHE_ROOT/node-$K8S_VERSION-$(uname -m)"
BIN="$DEST/bin"
# Every file the node tier needs (devcluster/node.py BINARIES names the same).
BINARIES=(runc containerd ctr containerd-shim-runc-v2 cni/bridge cni/host-local cni/loopback
    cni/portmap crictl kubelet kube-proxy kubectl dra-example-kubeletplugin helm buildkitd
    buildctl coredns prometheus)

if [[ "${1:-}" == "--path" ]]; then
    echo "$BIN"
    exit 0
fi

cached() {
    local b
    for b in "${BINARIES[@]}"; do [[ -x "$BIN/$b" ]] || return 1; done
}

missing_packages() {
    local p
    for p in "${DEBIAN_PACKAGES[@]}"; do
        dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$' ||
            echo "$p"
    done
}

log() { echo "build-node: $*" >&2; }

install_packages() {
    local need
    need=$(missing_packages)
    [[ -z "$need" ]] && return 0
    if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null; then
        log "missing Debian packages (install them as root): $need"
        return 1
    fi
    log "installing $need"
    # shellcheck disable=SC2086
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need; } \
        >"$CACHE_ROOT/apt.log" 2>&1 || { tail -20 "$CACHE_ROOT/apt.log" >&2; return 1; }
}

mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/.node-$K8S_VERSION.lock"
if command -v flock >/dev/null; then flock 9; fi
install_packages
if cached; then
    echo "$BIN"
    exit 0
fi
command -v go >/dev/null || { log "go not found"; exit 2; }

export GOFLAGS="-trimpath -buildvcs=false -mod=mod"
export CGO_ENABLED=0
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
SRC="$DEST/src"
mkdir -p "$SRC" "$BIN/cni"
start=$(date +%s)

# module_copy MODULE VERSION: a writable copy of the released module, in $SRC (printed).
module_copy() {
    local module="$1" version="$2" dir from
    dir="$SRC/$(tr '/' '_' <<<"$module")@$version"
    if [[ ! -f "$dir/.copied" ]]; then
        log "downloading $module $version"
        from=$(cd "$SRC" && GOFLAGS= go mod download -json "$module@$version" |
            sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
        [[ -d "$from" ]] || { log "$module@$version: not downloaded"; return 1; }
        rm -rf "$dir"
        cp -r "$from" "$dir"
        chmod -R u+w "$dir"
        touch "$dir/.copied"
    fi
    echo "$dir"
}

# build DIR PACKAGE NAME [LDFLAGS [TAGS]]: go build PACKAGE inside DIR into $BIN/NAME,
# unless it is there already.
build() {
    local dir="$1" pkg="$2" name="$3" ldflags="${4:-}" tags="${5:-}" logf
    [[ -x "$BIN/$name" ]] && return 0
    logf="$SRC/build-${name//\//_}.log"
    log "building $name ($pkg)"
    (cd "$dir" && nice go build -tags "$tags" -ldflags="-s -w $ldflags" \
        -o "$BIN/$name.tmp" "$pkg") >"$logf" 2>&1 || { tail -40 "$logf" >&2; return 1; }
    mv "$BIN/$name.tmp" "$BIN/$name"
}

# --- runc: cgo, with seccomp (RuntimeDefault needs it) ---------------------------------
# Its Makefile's libpathrs tag needs a Rust library: left out.
dir=$(module_copy github.com/opencontainers/runc "v$RUNC_VERSION")
CGO_ENABLED=1 build "$dir" . runc "-X main.version=$RUNC_VERSION" "seccomp urfave_cli_no_docs"

# --- containerd (the 2.2 line keeps cgroup v1 support) ---------------------------------
dir=$(module_copy github.com/containerd/containerd/v2 "v$CONTAINERD_VERSION")
CTRD_X="-X github.com/containerd/containerd/v2/version.Version=v$CONTAINERD_VERSION"
build "$dir" ./cmd/containerd containerd "$CTRD_X"
build "$dir" ./cmd/ctr ctr "$CTRD_X"
build "$dir" ./cmd/containerd-shim-runc-v2 containerd-shim-runc-v2 "$CTRD_X" \
    "urfave_cli_no_docs no_grpc"

# --- CNI plugins ---------------------------------------------------------------------
dir=$(module_copy github.com/containernetworking/plugins "v$CNI_VERSION")
for plugin in main/bridge ipam/host-local main/loopback meta/portmap; do
    build "$dir" "./plugins/$plugin" "cni/${plugin#*/}" \
        "-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=v$CNI_VERSION"
done

# --- crictl ----------------------------------------------------------------------------
dir=$(module_copy sigs.k8s.io/cri-tools "v$CRICTL_VERSION")
build "$dir" ./cmd/crictl crictl "-X sigs.k8s.io/cri-tools/pkg/version.Version=v$CRICTL_VERSION"

# --- the kubelet, kube-proxy and kubectl at K8S_VERSION ----------------------------------
KUBE="$SRC/kube"
kube_module "$KUBE" "$K8S_VERSION" kubelet kube-proxy kubectl || exit 1
KUBE_X=$(kube_version_ldflags "$K8S_VERSION")
for cmd in kubelet kube-proxy kubectl; do
    build "$KUBE" "k8s.io/kubernetes/cmd/$cmd" "$cmd" "$KUBE_X"
done

# --- the DRA example driver's kubelet plugin -------------------------------------------
DRA="$SRC/dra-example-driver"
mkdir -p "$DRA"
if [[ ! -f "$DRA/.resolved" ]]; then
    log "resolving sigs.k8s.io/dra-example-driver v$DRA_DRIVER_VERSION"
    dmod=$(cd "$DRA" && GOFLAGS= go mod download -json \
        "sigs.k8s.io/dra-example-driver@v$DRA_DRIVER_VERSION" |
        sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
    [[ -f "$dmod" ]] || { log "dra-example-driver v$DRA_DRIVER_VERSION: not downloaded"; exit 1; }
    goline=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$dmod")
    printf '// Generated by scripts/build-node.sh: builds the DRA example driver %s.\n' \
        "v$DRA_DRIVER_VERSION" >"$DRA/go.mod"
    printf 'module llmkube.local/drabuild\n\ngo %s\n\nrequire sigs.k8s.io/dra-example-driver v%s\n' \
        "$goline" "$DRA_DRIVER_VERSION" >>"$DRA/go.mod"
    printf '//go:build tools\n\npackage tools\n\nimport _ "sigs.k8s.io/dra-example-driver/cmd/dra-example-kubeletplugin"\n' \
        >"$DRA/tools.go"
    (cd "$DRA" && go mod tidy) >"$DRA/tidy.log" 2>&1 || { tail -40 "$DRA/tidy.log" >&2; exit 1; }
    touch "$DRA/.resolved"
fi
build "$DRA" sigs.k8s.io/dra-example-driver/cmd/dra-example-kubeletplugin dra-example-kubeletplugin

# --- helm ------------------------------------------------------------------------------
dir=$(module_copy helm.sh/helm/v4 "v$HELM_VERSION")
build "$dir" ./cmd/helm helm "-X helm.sh/helm/v4/internal/version.version=v$HELM_VERSION"

# --- BuildKit (go install refuses its go.mod's exclude lines: build inside the copy) -----
dir=$(module_copy github.com/moby/buildkit "v$BUILDKIT_VERSION")
BK_X="-X github.com/moby/buildkit/version.Version=v$BUILDKIT_VERSION"
build "$dir" ./cmd/buildkitd buildkitd "$BK_X"
build "$dir" ./cmd/buildctl buildctl "$BK_X"

# --- CoreDNS: the cluster DNS (Services by name, as every real cluster resolves them) ----
dir=$(module_copy github.com/coredns/coredns "v$COREDNS_VERSION")
build "$dir" . coredns

# --- Prometheus, with its Kubernetes service discovery ------------------------------------
dir=$(module_copy github.com/prometheus/prometheus "v$PROMETHEUS_VERSION")
build "$dir" ./cmd/prometheus prometheus \
    "-X github.com/prometheus/common/version.Version=2.${PROMETHEUS_VERSION#0.}"

cached || { log "built, but something is missing in $BIN"; exit 1; }
log "built in $(($(date +%s) - start)) s: $BIN"
echo "$BIN"
