"""The init container that downloads a Model given as an http(s) URL into the pod's volume.

The script is idempotent: a file already there (a re-run after a node reboot, or a
restarted init container) is kept and the container exits 0 without downloading; a
partial download (`<file>.part`) is resumed, or fetched again when the server cannot
resume it; the file appears under its name only once complete (`mv` of the part).
"""

from __future__ import annotations

import posixpath
from typing import Any
from urllib.parse import urlparse

LOADER_IMAGE = "curlimages/curl:8.18.0"
MODEL_DIR = "/models"

# $0: destination file, $1: URL.
SCRIPT = """set -eu
dest="$0"; url="$1"
if [ -s "$dest" ]; then
  echo "model present: $dest"
  exit 0
fi
if ! curl -fL --retry 5 -C - -o "$dest.part" "$url"; then
  echo "resume failed, downloading again"
  rm -f "$dest.part"
  curl -fL --retry 5 -o "$dest.part" "$url"
fi
mv "$dest.part" "$dest"
"""


def model_location(source: str) -> tuple[str, dict[str, Any] | None]:
    """What the runtime loads, and the init container that downloads it when it is a URL."""
    url = urlparse(source)
    if url.scheme not in ("http", "https"):
        return source, None  # a hub repository id or a path inside the image
    filename = posixpath.basename(url.path) or "model"
    path = f"{MODEL_DIR}/{filename}"
    loader = {
        "name": "model-loader",
        "image": LOADER_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", SCRIPT, path, source],
        "volumeMounts": [{"name": "models", "mountPath": MODEL_DIR}],
    }
    return path, loader
