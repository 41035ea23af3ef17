"""The loader: the init container (or prefetch Job container) that stages a Model's files.

It downloads each file of the Model (one file for http(s), hf://org/repo/file and s3
sources; spec.files plus spec.mmproj for a multi-file Model) into its directory: the
operator's cache PVC under /models/<cacheKey>/, or the pod's emptyDir /models. Every
input reaches the script through env, never spliced into it.

- A file is written as `<file>.part` (resumed with `curl -C -`, fetched again when the
  server cannot resume) and renamed into place only once complete and verified; its
  sha256 is kept next to it (`.<file>.sha256`), so a replica or restart that finds the
  file in the cache reuses it without reading it again.
- spec.sha256 is checked on the primary file (files[0]): on a mismatch the part is
  removed, nothing is renamed into place, and the loader exits 1 (the runtime never
  starts on that file). A cached file whose recorded digest differs fails the same way.
- refreshPolicy OnChange: a cached file is revalidated with a conditional GET on the
  ETag saved at download (curl --etag-compare); 304 keeps it, 200 replaces it; if the
  source is unreachable the cached copy is kept (LLMKube's behaviour).
- s3 sources are signed with AWS SigV4 from sourceSecretRef's keys (env via
  secretKeyRef); huggingface.co sources send `Authorization: Bearer $HF_TOKEN` (curl -L
  does not forward it to the CDN the hub redirects to).

What happened is written as JSON to the termination message (/dev/termination-log),
which the Model reconciler turns into status (the controller itself fetches nothing).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlparse

from api import ModelSpec
from api.source import HF_ENDPOINT, HF_HOSTS, ModelSource

LOADER_IMAGE = "curlimages/curl:8.18.0"  # curl >= 7.75 signs with --aws-sigv4
LOADER_NAME = "model-loader"
MODEL_DIR = "/models"
EMPTY_DIR_VOLUME = "models"
CACHE_VOLUME = "model-cache"  # LLMKube's volume name for the cache PVC
TERMINATION_LOG = "/dev/termination-log"
# The Secret's keys the s3 loader reads, and whether the Secret may lack them.
S3_KEYS = (
    ("AWS_ACCESS_KEY_ID", False),
    ("AWS_SECRET_ACCESS_KEY", False),
    ("AWS_REGION", True),
    ("AWS_ENDPOINT_URL", True),
    ("AWS_SESSION_TOKEN", True),
)

SCRIPT = r"""set -eu
log="${LOADER_TERMINATION_LOG:-/dev/termination-log}"
dir="$LOADER_DIR"
esc() { printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g'; }
fail() {  # $1 reason, $2 file, $3 extra JSON members
  printf '{"cacheKey":"%s","error":"%s","file":"%s"%s}' \
    "$LOADER_CACHE_KEY" "$1" "$(esc "$2")" "${3:-}" >"$log"
  echo "ERROR: $1: $2" >&2
  exit 1
}
if [ -n "${LOADER_S3:-}" ]; then
  region="${AWS_REGION:-us-east-1}"
  endpoint="${AWS_ENDPOINT_URL:-https://s3.$region.amazonaws.com}"
fi
fetch() {  # $1 URL (s3: bucket/key), then curl options
  url="$1"; shift
  if [ -n "${LOADER_S3:-}" ]; then
    if [ -n "${AWS_SESSION_TOKEN:-}" ]; then
      set -- "$@" -H "x-amz-security-token: $AWS_SESSION_TOKEN"
    fi
    curl -fL --retry 5 --aws-sigv4 "aws:amz:$region:s3" \
      --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "$@" "${endpoint%/}/$url"
  elif [ -n "${LOADER_HF_AUTH:-}" ] && [ -n "${HF_TOKEN:-}" ]; then
    curl -fL --retry 5 -H "Authorization: Bearer ${HF_TOKEN}" "$@" "$url"
  else
    curl -fL --retry 5 "$@" "$url"
  fi
}
download() {  # $1 URL, $2 destination, $3 where the ETag goes; resumes an earlier part
  if ! fetch "$1" -C - -o "$2.part" --etag-save "$3"; then
    echo "resume failed, downloading again"
    rm -f "$2.part"
    fetch "$1" -o "$2.part" --etag-save "$3" || return 1
  fi
}
staged=""; downloaded=""; first=1; primary_sum=""; primary_size=""; source_etag=""
while IFS=' ' read -r url rel; do
  [ -n "$rel" ] || continue
  dest="$dir/$rel"
  mark="$(dirname "$dest")/.$(basename "$dest")"
  mkdir -p "$(dirname "$dest")"
  fresh=1
  if [ -s "$dest" ] && [ -s "$mark.sha256" ]; then
    fresh=0
    if [ "${LOADER_REFRESH:-}" = OnChange ] && [ -s "$mark.etag" ]; then
      rm -f "$dest.part"
      if code="$(fetch "$url" -s -w '%{http_code}' --etag-compare "$mark.etag" \
          --etag-save "$mark.etag.new" -o "$dest.part")"; then
        if [ "$code" = 200 ] && [ -e "$dest.part" ]; then
          echo "changed upstream: $rel"; fresh=2
        else
          echo "unchanged upstream: $rel"; rm -f "$dest.part" "$mark.etag.new"
        fi
      else
        echo "revalidation failed, keeping the cached $rel"; rm -f "$dest.part" "$mark.etag.new"
      fi
    else
      echo "cached: $rel"
    fi
  fi
  if [ "$fresh" = 1 ]; then
    echo "downloading $rel"
    download "$url" "$dest" "$mark.etag.new" || fail DownloadFailed "$rel"
  fi
  if [ "$fresh" != 0 ]; then
    sum="$(sha256sum "$dest.part" | cut -d' ' -f1)"
    if [ "$first" = 1 ] && [ -n "${LOADER_SHA256:-}" ] && [ "$sum" != "$LOADER_SHA256" ]; then
      rm -f "$dest.part" "$mark.etag.new"
      fail Sha256Mismatch "$rel" ",\"expected\":\"$LOADER_SHA256\",\"actual\":\"$sum\""
    fi
    mv "$dest.part" "$dest"
    printf '%s\n' "$sum" >"$mark.sha256"
    if [ -s "$mark.etag.new" ]; then
      mv "$mark.etag.new" "$mark.etag"
    else
      rm -f "$mark.etag.new"
    fi
    downloaded="$downloaded${downloaded:+,}\"$(esc "$rel")\""
  fi
  sum="$(cat "$mark.sha256")"
  if [ "$first" = 1 ]; then
    if [ -n "${LOADER_SHA256:-}" ] && [ "$sum" != "$LOADER_SHA256" ]; then
      fail Sha256Mismatch "$rel" ",\"expected\":\"$LOADER_SHA256\",\"actual\":\"$sum\""
    fi
    primary_sum="$sum"; primary_size="$(wc -c <"$dest" | tr -d ' ')"
    if [ -s "$mark.etag" ]; then source_etag="$(esc "$(cat "$mark.etag")")"; fi
  fi
  first=0
  staged="$staged${staged:+,}\"$(esc "$rel")\""
done <<EOF
$LOADER_FILES
EOF
printf '{"cacheKey":"%s","path":"%s","size":"%s","sha256":"%s",%s}' \
  "$LOADER_CACHE_KEY" "$(esc "$LOADER_PATH")" "$primary_size" "$primary_sum" \
  "\"stagedFiles\":[$staged],\"downloaded\":[$downloaded],\"sourceETag\":\"$source_etag\"" \
  >"$log"
echo "staged in $dir: $staged"
"""


@dataclass(frozen=True)
class Store:
    """Where the loader writes: a cache PVC (claim), or the pod's emptyDir (None)."""

    claim: str | None = None

    @property
    def volume_name(self) -> str:
        return CACHE_VOLUME if self.claim else EMPTY_DIR_VOLUME

    def volume(self) -> dict[str, Any]:
        if self.claim:
            return {"name": CACHE_VOLUME, "persistentVolumeClaim": {"claimName": self.claim}}
        return {"name": EMPTY_DIR_VOLUME, "emptyDir": {}}

    def runtime_mount(self) -> dict[str, Any]:
        """The runtime reads the cache, never writes it (other pods share it)."""
        mount: dict[str, Any] = {"name": self.volume_name, "mountPath": MODEL_DIR}
        if self.claim:
            mount["readOnly"] = True
        return mount

    def directory(self, model: ModelSpec) -> str:
        return f"{MODEL_DIR}/{model.cache_key}" if self.claim else MODEL_DIR


EPHEMERAL = Store()


@dataclass(frozen=True)
class Loading:
    """What the loader stages: the runtime's path, the container, the mmproj path."""

    path: str
    container: dict[str, Any]
    mmproj: str | None = None


def s3_env(secret: str) -> list[dict[str, Any]]:
    return [
        {
            "name": key,
            "valueFrom": {
                "secretKeyRef": {"name": secret, "key": key, **({"optional": True} if opt else {})}
            },
        }
        for key, opt in S3_KEYS
    ]


def secret_env(name: str, secret: str, key: str, optional: bool = False) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": secret, "key": key}
    if optional:
        ref["optional"] = True
    return {"name": name, "valueFrom": {"secretKeyRef": ref}}


def is_hf_source(source: ModelSource) -> bool:
    """Sources the HF token may be sent to: the hub, or a URL on huggingface.co itself."""
    if source.kind in ("hub", "hub-file"):
        return True
    return source.kind == "url" and (urlparse(source.url).hostname or "") in HF_HOSTS


def hf_token_env(model: ModelSpec, isvc_token: tuple[str, str] | None) -> dict[str, Any] | None:
    """HF_TOKEN for an hf source: Model sourceSecretRef's HF_TOKEN key (LLMKube's), else
    the service's <runtime>Config.hfTokenSecretRef. A reference, never the value."""
    if not is_hf_source(model.location):
        return None
    if model.source_secret:
        return secret_env("HF_TOKEN", model.source_secret, "HF_TOKEN", optional=True)
    if isvc_token:
        return secret_env("HF_TOKEN", isvc_token[0], isvc_token[1])
    return None


def _entries(model: ModelSpec) -> list[tuple[str, str]]:
    """(file relative to the loader's directory, URL) for each file to stage."""
    source = model.location
    if model.files:
        if source.kind == "hub":
            base = f"{HF_ENDPOINT}/{source.repo}/resolve/{source.revision or 'main'}"
        elif source.kind == "s3":  # the key is the prefix the files are under
            base = quote(f"{source.bucket}/{source.key}", safe="/-_.~")
        else:
            base = source.url.rstrip("/")
        return [(f, f"{base}/{quote(f)}") for f in model.staged_files]
    name = source.filename
    if source.kind == "s3":
        return [(name, quote(f"{source.bucket}/{source.key}", safe="/-_.~"))]
    return [(name, source.url)]


def needs_loader(model: ModelSpec) -> bool:
    return bool(model.files) or model.location.kind in ("url", "hub-file", "s3")


def loader_for(
    model: ModelSpec,
    store: Store = EPHEMERAL,
    runtime: str = "vllm",
    isvc_token: tuple[str, str] | None = None,
) -> Loading | None:
    """The loader of this Model into `store`, or None when no loader fetches it."""
    if not needs_loader(model):
        return None
    directory = store.directory(model)
    entries = _entries(model)
    primary = f"{directory}/{entries[0][0]}"
    # A safetensors/pytorch checkpoint is its directory; a GGUF (and llama.cpp) the file.
    whole_dir = model.files and runtime != "llamacpp" and model.format in ("safetensors", "pytorch")
    path = directory if whole_dir else primary
    env: list[dict[str, Any]] = [
        {"name": "LOADER_DIR", "value": directory},
        {"name": "LOADER_PATH", "value": path},
        {"name": "LOADER_CACHE_KEY", "value": model.cache_key},
        # "<URL> <file>" lines: a URL holds no space (quoted), a file name may.
        {"name": "LOADER_FILES", "value": "\n".join(f"{url} {rel}" for rel, url in entries)},
    ]
    if model.sha256:
        env.append({"name": "LOADER_SHA256", "value": model.sha256})
    if model.refresh_policy == "OnChange":
        env.append({"name": "LOADER_REFRESH", "value": "OnChange"})
    if model.location.kind == "s3":
        assert model.source_secret, "parse_model requires sourceSecretRef for an s3:// source"
        env += [{"name": "LOADER_S3", "value": "1"}, *s3_env(model.source_secret)]
    token = hf_token_env(model, isvc_token)
    if token:
        env += [{"name": "LOADER_HF_AUTH", "value": "1"}, token]
    container: dict[str, Any] = {
        "name": LOADER_NAME,
        "image": LOADER_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", SCRIPT],
        "env": env,
        "volumeMounts": [{"name": store.volume_name, "mountPath": MODEL_DIR}],
        "terminationMessagePath": TERMINATION_LOG,
        "terminationMessagePolicy": "File",
    }
    mmproj = posixpath.join(directory, model.mmproj) if model.mmproj else None
    return Loading(path, container, mmproj)
