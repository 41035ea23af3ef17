"""The loader: the init container (or prefetch Job container) that stages a Model's files.

It downloads each file of the Model (one file for http(s), hf://org/repo/file and s3
sources; spec.files plus spec.mmproj for a multi-file Model) into its directory: the
operator's cache PVC under /models/<cacheKey>/, or the pod's emptyDir /models. Every
input reaches the script through env, never spliced into it, and one value per item:
LOADER_URL_<i> and LOADER_FILE_<i> for i below LOADER_COUNT (nothing is split or parsed
out of a value). The controller computes each target; the script refuses one that is
absolute, holds '..' or a control character, or names a hidden (its own) file, and a URL
that is not one http(s) URL (BadTarget, BadSource).

- curl runs with -q (no ~/.curlrc), `--proto =https,http --proto-redir =https` (no other
  protocol, no redirect to plain http), --globoff (`[1-3]` or `{a,b}` in a URL is one
  URL, not a set) and the URL after --url (never an option).
- A file is written to this pod's own part (`.<file>.<pod uid>.part`: a restarted loader
  resumes it with `curl -C -`; no other loader touches it), verified, and published with
  a hard link, which fails if the file is there: the first complete copy wins, a later
  loader discards its own and uses it (a volume without hard links: the last rename).
  Parts untouched for a day (a killed loader's) are removed.
- Its sha256 is kept next to it (`.<file>.sha256`: the digest, the file's inode, size
  and mtime, and who vouches for the digest), so a replica that finds the file reuses the
  digest without reading the file, as long as it is of that very file; otherwise the file
  is hashed again.
- Every file can be pinned: LOADER_SHA256_<i> (spec.sha256 for files[0], spec.fileDigests
  for any file). A download that differs is removed and the loader exits 1 (the runtime
  never starts on it); a cached pinned file is hashed again on every start, and one that
  differs is downloaded again (and replaced only by a copy that matches).
- Hub sources (LOADER_HUB): the hub's `resolve` response carries an LFS file's sha256 in
  `X-Linked-Etag` (on the redirect to its CDN; curl -D keeps every response's headers).
  Every download is checked against it, pinned or not, so a mirror or CDN cannot hand out
  other bytes; a file without it (kept in git, not LFS) is reported as `computed`.
- The report names, per file, its size, sha256 and where the digest came from (`spec`,
  `hub`, `computed`), as many files as fit the kubelet's 4096-byte termination message;
  `filesOmitted` counts the rest.
- refreshPolicy OnChange: a cached file is revalidated with a conditional GET on the
  ETag saved at download (curl --etag-compare); 304 keeps it, 200 replaces it; if the
  source is unreachable the cached copy is kept (LLMKube's behaviour).
- s3 sources are signed with AWS SigV4 from sourceSecretRef's keys (env via
  secretKeyRef); hub sources (the operator's --hf-endpoint) send `Authorization: Bearer
  $HF_TOKEN` to the hub alone (curl -L does not forward it to the CDN the hub redirects
  to).

What happened is written as JSON to the termination message (/dev/termination-log),
which the Model reconciler turns into status (the controller itself fetches nothing).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlparse

from api import ModelSpec
from api.source import HF_ENDPOINT, HF_HOSTS, ModelSource, hub_file_url

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
esc() { printf '%s' "$1" | tr '\001-\037\177' '?' | sed 's/\\/\\\\/g; s/"/\\"/g'; }
fail() {  # $1 reason, $2 file, $3 extra JSON members
  printf '{"cacheKey":"%s","error":"%s","file":"%s"%s}' \
    "$LOADER_CACHE_KEY" "$1" "$(esc "$2")" "${3:-}" >"$log"
  echo "ERROR: $1: $2" >&2
  exit 1
}
case "$dir" in /*) ;; *) fail BadTarget "$dir" ;; esac
case "$dir" in *..*) fail BadTarget "$dir" ;; esac
case "${LOADER_COUNT:-}" in '' | *[!0-9]*) fail BadInput LOADER_COUNT ;; esac
# This pod's name for its temporary files: a restarted loader resumes its own part, and
# no other pod (replica, prefetch Job) ever writes to it.
me="$(printf '%s' "${LOADER_POD_UID:-$(hostname)}" | tr -c 'A-Za-z0-9-' '_')"
[ -n "$me" ] || me=pod
plain() { [ "$(printf '%s' "$1" | tr -d '\001-\040\177')" = "$1" ]; }  # no space, no control
if [ -n "${LOADER_S3:-}" ]; then
  region="${AWS_REGION:-us-east-1}"
  endpoint="${AWS_ENDPOINT_URL:-https://s3.$region.amazonaws.com}"
  case "$endpoint" in http://* | https://*) ;; *) fail BadSource AWS_ENDPOINT_URL ;; esac
  plain "$endpoint" || fail BadSource AWS_ENDPOINT_URL
fi
get() {  # no ~/.curlrc; http(s) only, a redirect only to https; no URL globbing
  curl -q --globoff --proto =https,http --proto-redir =https -fL --retry 5 "$@"
}
fetch() {  # $1 URL (s3: bucket/key), then curl options; the URL is never an option
  url="$1"; shift
  if [ -n "${LOADER_S3:-}" ]; then
    if [ -n "${AWS_SESSION_TOKEN:-}" ]; then
      set -- "$@" -H "x-amz-security-token: $AWS_SESSION_TOKEN"
    fi
    get --aws-sigv4 "aws:amz:$region:s3" \
      --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "$@" --url "${endpoint%/}/$url"
  elif [ -n "${LOADER_HF_AUTH:-}" ] && [ -n "${HF_TOKEN:-}" ]; then
    get -H "Authorization: Bearer ${HF_TOKEN}" "$@" --url "$url"
  else
    get "$@" --url "$url"
  fi
}
download() {  # $1 URL, $2 this pod's part, $3 where the ETag goes, $4 the headers;
  # resumes the part
  if ! fetch "$1" -C - -o "$2" --etag-save "$3" -D "$4"; then
    echo "resume failed, downloading again"
    rm -f "$2"
    fetch "$1" -o "$2" --etag-save "$3" -D "$4" || return 1
  fi
}
# The hub's sha256 of an LFS file: X-Linked-Etag on its resolve response (the redirect to
# the CDN; curl -D keeps every response's headers). Empty: not a hub source, or no such
# header (a file kept in git, not LFS).
hub_digest() {  # $1 the header dump
  [ -n "${LOADER_HUB:-}" ] && [ -s "$1" ] || return 0
  tr -d '\r' <"$1" | grep -i '^x-linked-etag:' | tail -n 1 | sed 's/^[^:]*:[ ]*//; s/^W\///' \
    | tr -d '"' | grep -x '[0-9a-fA-F]\{64\}' | tr 'A-F' 'a-f' || true
}
digest() { sha256sum "$1" | cut -d' ' -f1; }
stamp() { stat -c '%i:%s:%Y' "$1"; }  # inode, size, mtime: which file a digest is of
record() {  # $1 file, $2 its sidecar, $3 its sha256, $4 who vouches for it (hub, computed)
  printf '%s %s %s\n' "$3" "$(stamp "$1")" "$4" >"$2.$me"
  mv -f "$2.$me" "$2"
}
recorded() {  # $1 file, $2 sidecar: sets sum and from to what is recorded for this very
  # file, else hashes it now (from=computed)
  sum=""; at=""; from=""
  if [ -s "$2" ]; then read -r sum at from <"$2" || true; fi
  if [ -z "$sum" ] || [ "$at" != "$(stamp "$1")" ]; then
    sum="$(digest "$1")"; from=computed; record "$1" "$2" "$sum" "$from"
  fi
  [ "$from" = hub ] || from=computed
}
mismatch() {  # $1 file, $2 actual digest, $3 expected digest, $4 whose (spec, hub)
  fail Sha256Mismatch "$1" \
    ",\"expected\":\"$3\",\"actual\":\"$2\",\"expectedFrom\":\"$4\""
}
entries=""  # the per-file report, a JSON object a line
report_file() {  # $1 name, $2 size, $3 sha256, $4 digest source
  entries="$entries{\"name\":\"$(esc "$1")\",\"size\":$2,\"sha256\":\"$3\",\"digestSource\":\"$4\"}
"
}
staged=""; downloaded=""; primary_sum=""; primary_size=""; source_etag=""
i=0
while [ "$i" -lt "$LOADER_COUNT" ]; do
  eval "url=\${LOADER_URL_$i:-}; rel=\${LOADER_FILE_$i:-}"
  # One http(s) URL (s3: bucket/key under the endpoint), never an option or two URLs.
  if [ -z "${LOADER_S3:-}" ]; then
    case "$url" in http://?* | https://?*) ;; *) fail BadSource "$url" ;; esac
  fi
  [ -n "$url" ] && plain "$url" || fail BadSource "$url"
  # The target stays inside $dir: relative, no '..', no hidden (the loader's own) names.
  case "$rel" in '' | /* | .* | */.* | *..* | *//* | */) fail BadTarget "$rel" ;; esac
  [ "$(printf '%s' "$rel" | tr -d '\001-\037\177')" = "$rel" ] || fail BadTarget "$rel"
  dest="$dir/$rel"
  d="${dest%/*}"; b="${dest##*/}"
  mark="$d/.$b"; part="$mark.$me.part"; etag_new="$mark.$me.etag"; hdr="$mark.$me.headers"
  mkdir -p "$d"
  [ ! -d "$dest" ] || fail BadTarget "$rel"
  eval "pin=\${LOADER_SHA256_$i:-}"
  case "$pin" in '' | ????????????????????????????????????????????????????????????????) ;;
    *) fail BadInput "LOADER_SHA256_$i" ;; esac
  fresh=1; replace=0; sum=""; from=""; hub=""; rm -f "$hdr"
  if [ -s "$dest" ]; then
    fresh=0
    if [ "${LOADER_REFRESH:-}" = OnChange ] && [ -s "$mark.etag" ]; then
      rm -f "$part"
      if code="$(fetch "$url" -s -w '%{http_code}' --etag-compare "$mark.etag" \
          --etag-save "$etag_new" -o "$part" -D "$hdr")"; then
        if [ "$code" = 200 ] && [ -e "$part" ]; then
          echo "changed upstream: $rel"; fresh=2; replace=1
        else
          echo "unchanged upstream: $rel"; rm -f "$part" "$etag_new"
        fi
      else
        echo "revalidation failed, keeping the cached $rel"; rm -f "$part" "$etag_new"
      fi
    else
      echo "cached: $rel"
    fi
    if [ "$fresh" = 0 ] && [ -n "$pin" ]; then  # a pinned file is hashed, never trusted
      sum="$(digest "$dest")"
      if [ "$sum" != "$pin" ]; then
        echo "the cached $rel has sha256 $sum, not the pinned one: downloading it again"
        fresh=1; replace=1; sum=""
      fi
    fi
  fi
  if [ "$fresh" = 1 ]; then
    echo "downloading $rel"
    download "$url" "$part" "$etag_new" "$hdr" || fail DownloadFailed "$rel"
  fi
  if [ "$fresh" != 0 ]; then
    got="$(digest "$part")"
    hub="$(hub_digest "$hdr")"; rm -f "$hdr"
    if [ -n "$pin" ] && [ "$got" != "$pin" ]; then
      rm -f "$part" "$etag_new"
      mismatch "$rel" "$got" "$pin" spec
    fi
    if [ -n "$hub" ] && [ "$got" != "$hub" ]; then
      rm -f "$part" "$etag_new"
      mismatch "$rel" "$got" "$hub" hub
    fi
    want="${pin:-$hub}"
    # Publish: a replacement renames over the file; a first copy is linked into place,
    # and the first complete copy wins (another loader may have linked its own first).
    published=1
    if [ "$replace" = 1 ]; then
      mv -f "$part" "$dest"
    elif ln "$part" "$dest" 2>/dev/null; then
      rm -f "$part"
    elif [ ! -e "$dest" ]; then
      mv -f "$part" "$dest"  # a volume without hard links: the last rename wins
    elif [ -n "$want" ] && [ "$(digest "$dest")" != "$want" ]; then
      mv -f "$part" "$dest"  # theirs is not the pinned (or the hub's) file, ours is
    else
      echo "another loader staged $rel first: using it"
      rm -f "$part" "$etag_new"; published=0
    fi
    if [ "$published" = 1 ]; then
      sum="$got"; from=computed; [ -z "$hub" ] || from=hub
      record "$dest" "$mark.sha256" "$sum" "$from"
      if [ -s "$etag_new" ]; then mv -f "$etag_new" "$mark.etag"; else rm -f "$etag_new"; fi
    fi
    downloaded="$downloaded\"$(esc "$rel")\"
"
  fi
  if [ -z "$sum" ]; then recorded "$dest" "$mark.sha256"; fi
  if [ -n "$pin" ] && [ "$sum" != "$pin" ]; then mismatch "$rel" "$sum" "$pin" spec; fi
  [ -z "$pin" ] || from=spec
  size="$(stat -c %s "$dest")"
  report_file "$rel" "$size" "$sum" "$from"
  if [ "$i" = 0 ]; then
    primary_sum="$sum"; primary_size="$size"
    if [ -s "$mark.etag" ]; then source_etag="$(esc "$(cat "$mark.etag")")"; fi
  fi
  # Parts a killed loader left a day ago (a live download keeps its part's mtime fresh).
  find "$d" -maxdepth 1 -type f -name '.*.part' -mmin +1440 | while IFS= read -r old; do
    rm -f "$old"
  done
  staged="$staged\"$(esc "$rel")\"
"
  i=$((i + 1))
done
# The kubelet keeps 4096 bytes of a termination message: the lists get what room the
# fixed members leave, in this order, and each says how many items it left out.
[ "${#source_etag}" -le 256 ] || source_etag=""  # an origin's ETag is not ours to trust
head="$(printf '{"cacheKey":"%s","path":"%s","size":"%s","sha256":"%s","sourceETag":"%s"' \
  "$LOADER_CACHE_KEY" "$(esc "$LOADER_PATH")" "$primary_size" "$primary_sum" "$source_etag")"
room=$((${LOADER_REPORT_BYTES:-4000} - ${#head} - 120))
fit() {  # $1 JSON items, one a line: sets list to those that fit in room, cut to the rest
  list=""; cut=0
  while IFS= read -r item; do
    [ -n "$item" ] || continue
    if [ $((${#list} + ${#item} + 1)) -le "$room" ]; then
      list="$list${list:+,}$item"
    else
      cut=$((cut + 1))
    fi
  done <<EOF
$1
EOF
  room=$((room - ${#list}))
}
fit "$entries"; body=",\"files\":[$list],\"filesOmitted\":$cut"
fit "$staged"; body="$body,\"stagedFiles\":[$list]"
[ "$cut" = 0 ] || body="$body,\"stagedOmitted\":$cut"
fit "$downloaded"; body="$body,\"downloaded\":[$list]"
[ "$cut" = 0 ] || body="$body,\"downloadedOmitted\":$cut"
printf '%s%s}' "$head" "$body" >"$log"
echo "staged in $dir: $(printf '%s' "$staged" | tr '\n' ' ')"
"""


@dataclass(frozen=True)
class WeightsVolume:
    """Where the loader writes: a cache PVC (claim), or the pod's emptyDir (None), at
    most size_limit big (spec.resources.ephemeralStorage: the kubelet then evicts the
    pod that overran, not its neighbours on a node under DiskPressure)."""

    claim: str | None = None
    size_limit: str | None = None

    @property
    def volume_name(self) -> str:
        return CACHE_VOLUME if self.claim else EMPTY_DIR_VOLUME

    def volume(self) -> dict[str, Any]:
        if self.claim:
            return {"name": CACHE_VOLUME, "persistentVolumeClaim": {"claimName": self.claim}}
        empty_dir = {"sizeLimit": self.size_limit} if self.size_limit else {}
        return {"name": EMPTY_DIR_VOLUME, "emptyDir": empty_dir}

    def runtime_mount(self) -> dict[str, Any]:
        """The runtime reads the cache, never writes it (other pods share it)."""
        mount: dict[str, Any] = {"name": self.volume_name, "mountPath": MODEL_DIR}
        if self.claim:
            mount["readOnly"] = True
        return mount

    def directory(self, model: ModelSpec) -> str:
        return f"{MODEL_DIR}/{model.cache_key}" if self.claim else MODEL_DIR


EPHEMERAL = WeightsVolume()


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


def is_hf_source(source: ModelSource, hub: str = HF_ENDPOINT) -> bool:
    """Sources the HF token may be sent to: the hub, or a URL on the hub's own host (the
    operator's --hf-endpoint; huggingface.co's www alias only where that is the hub)."""
    if source.kind in ("hub", "hub-file"):
        return True
    return source.kind == "url" and on_hub(source.url, hub)


def on_hub(url: str, hub: str) -> bool:
    """Whether url is served by the hub at `hub` (same scheme, host and port)."""
    u, h = urlparse(url), urlparse(hub)
    if u.scheme != h.scheme or u.port != h.port:
        return False
    hosts = HF_HOSTS if hub == HF_ENDPOINT else (h.hostname,)
    return (u.hostname or "") in hosts


def hf_token_env(
    model: ModelSpec, isvc_token: tuple[str, str] | None, hub: str = HF_ENDPOINT
) -> dict[str, Any] | None:
    """HF_TOKEN for an hf source: Model sourceSecretRef's HF_TOKEN key (LLMKube's), else
    the service's <runtime>Config.hfTokenSecretRef. A reference, never the value."""
    if not is_hf_source(model.location, hub):
        return None
    if model.source_secret:
        return secret_env("HF_TOKEN", model.source_secret, "HF_TOKEN", optional=True)
    if isvc_token:
        return secret_env("HF_TOKEN", isvc_token[0], isvc_token[1])
    return None


def _entries(model: ModelSpec, hub: str) -> list[tuple[str, str]]:
    """(file relative to the loader's directory, URL) for each file to stage."""
    source = model.location
    if source.kind == "hub-file":
        return [(source.filename, hub_file_url(hub, source.repo, source.revision, source.path))]
    if model.files:
        if source.kind == "hub":
            base = hub_file_url(hub, source.repo, source.revision, "").rstrip("/")
        elif source.kind == "s3":  # the key is the prefix the files are under
            base = quote(f"{source.bucket}/{source.key}", safe="/-_.~")
        else:
            base = source.url.rstrip("/")
        return [(f, f"{base}/{quote(f)}") for f in model.staged_files]
    name = source.filename
    if source.kind == "s3":
        return [(name, quote(f"{source.bucket}/{source.key}", safe="/-_.~"))]
    return [(name, source.url)]


def staged_names(model: ModelSpec) -> tuple[str, ...]:
    """The files the loader stages, relative to its directory, in its order."""
    return tuple(rel for rel, _ in _entries(model, HF_ENDPOINT))


def needs_loader(model: ModelSpec) -> bool:
    return bool(model.files) or model.location.kind in ("url", "hub-file", "s3")


def loader_for(
    model: ModelSpec,
    store: WeightsVolume = EPHEMERAL,
    runtime: str = "vllm",
    isvc_token: tuple[str, str] | None = None,
    hub: str = HF_ENDPOINT,
) -> Loading | None:
    """The loader of this Model into `store`, or None when no loader fetches it; hub: the
    operator's --hf-endpoint, where hub sources download from."""
    if not needs_loader(model):
        return None
    directory = store.directory(model)
    entries = _entries(model, hub)
    primary = f"{directory}/{entries[0][0]}"
    # A safetensors/pytorch checkpoint is its directory; a GGUF (and llama.cpp) the file.
    whole_dir = model.files and runtime != "llamacpp" and model.format in ("safetensors", "pytorch")
    path = directory if whole_dir else primary
    env: list[dict[str, Any]] = [
        {"name": "LOADER_DIR", "value": directory},
        {"name": "LOADER_PATH", "value": path},
        {"name": "LOADER_CACHE_KEY", "value": model.cache_key},
        # Names this pod's temporary files (a restarted loader resumes its own part).
        {"name": "LOADER_POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        # One value per URL and per target: nothing is split, nothing parsed out of them.
        {"name": "LOADER_COUNT", "value": str(len(entries))},
    ]
    for i, (rel, url) in enumerate(entries):
        env += [
            {"name": f"LOADER_URL_{i}", "value": url},
            {"name": f"LOADER_FILE_{i}", "value": rel},
        ]
        pin = model.pinned_sha256(i)
        if pin:
            env.append({"name": f"LOADER_SHA256_{i}", "value": pin})
    if is_hf_source(model.location, hub):  # the hub vouches for its LFS files
        env.append({"name": "LOADER_HUB", "value": "1"})
    if model.refresh_policy == "OnChange":
        env.append({"name": "LOADER_REFRESH", "value": "OnChange"})
    if model.location.kind == "s3":
        assert model.source_secret, "parse_model requires sourceSecretRef for an s3:// source"
        env += [{"name": "LOADER_S3", "value": "1"}, *s3_env(model.source_secret)]
    token = hf_token_env(model, isvc_token, hub)
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
