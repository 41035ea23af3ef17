"""The init container that downloads a one-file Model source into the pod's volume.

http(s) URLs and hf://org/repo/file are fetched with curl; s3://bucket/key too, signed
with AWS SigV4 (curl --aws-sigv4, as LLMKube's downloader does) from the Secret named by
spec.sourceSecretRef, whose keys reach the container as env through secretKeyRef (never
copied into the pod spec). The object is read path-style, <endpoint>/<bucket>/<key>, at
AWS_ENDPOINT_URL (MinIO and other S3-compatible stores), else AWS's regional endpoint.

The script is idempotent: a file already there (a re-run after a node reboot, or a
restarted init container) is kept and the container exits 0 without downloading; a
partial download (`<file>.part`) is resumed, or fetched again when the server cannot
resume it; the file appears under its name only once complete (`mv` of the part).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from api.source import ModelSource

LOADER_IMAGE = "curlimages/curl:8.18.0"  # curl >= 7.75 signs with --aws-sigv4
MODEL_DIR = "/models"
# The Secret's keys the s3 loader reads, and whether the Secret must hold them.
S3_KEYS = (
    ("AWS_ACCESS_KEY_ID", False),
    ("AWS_SECRET_ACCESS_KEY", False),
    ("AWS_REGION", True),
    ("AWS_ENDPOINT_URL", True),
    ("AWS_SESSION_TOKEN", True),
)

# fetch() gets curl's extra options and the URL is in $url.
BODY = """if [ -s "$dest" ]; then
  echo "model present: $dest"
  exit 0
fi
if ! fetch -C - -o "$dest.part"; then
  echo "resume failed, downloading again"
  rm -f "$dest.part"
  fetch -o "$dest.part"
fi
mv "$dest.part" "$dest"
"""
# $0: destination file, $1: URL.
SCRIPT = (
    """set -eu
dest="$0"; url="$1"
fetch() { curl -fL --retry 5 "$@" "$url"; }
"""
    + BODY
)
# $0: destination file, $1: bucket/key, URL-encoded; credentials and endpoint from env.
S3_SCRIPT = (
    """set -eu
dest="$0"
region="${AWS_REGION:-us-east-1}"
endpoint="${AWS_ENDPOINT_URL:-https://s3.$region.amazonaws.com}"
url="${endpoint%/}/$1"
fetch() {
  if [ -n "${AWS_SESSION_TOKEN:-}" ]; then
    set -- "$@" -H "x-amz-security-token: $AWS_SESSION_TOKEN"
  fi
  curl -fL --retry 5 --aws-sigv4 "aws:amz:$region:s3" \\
    --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" "$@" "$url"
}
"""
    + BODY
)


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


def loader_for(source: ModelSource, secret: str | None) -> tuple[str, dict[str, Any] | None]:
    """The path the runtime loads and the init container that puts the file there, or
    (\"\", None) for a source no loader fetches."""
    if source.kind not in ("url", "hub-file", "s3"):
        return "", None
    path = f"{MODEL_DIR}/{source.filename}"
    loader: dict[str, Any] = {
        "name": "model-loader",
        "image": LOADER_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "volumeMounts": [{"name": "models", "mountPath": MODEL_DIR}],
    }
    if source.kind == "s3":
        assert secret, "parse_model requires sourceSecretRef for an s3:// source"
        obj = quote(f"{source.bucket}/{source.key}", safe="/-_.~")
        loader["command"] = ["sh", "-c", S3_SCRIPT, path, obj]
        loader["env"] = s3_env(secret)
    else:
        loader["command"] = ["sh", "-c", SCRIPT, path, source.url]
    return path, loader
