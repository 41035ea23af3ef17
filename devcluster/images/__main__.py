"""python -m devcluster.images [--no-controller] [DEST]: build the node tier's image tars
(default DEST: the cache the node tier imports from) and print each name and tar."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..node import images_dir
from .build import build_images


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m devcluster.images")
    parser.add_argument("dest", nargs="?", type=Path, default=None)
    parser.add_argument("--no-controller", action="store_true", help="skip the BuildKit build")
    args = parser.parse_args()
    dest = args.dest or images_dir()
    build_images(dest, controller=not args.no_controller)
    print(json.dumps(json.loads((dest / "images.json").read_text()), indent=2))


if __name__ == "__main__":
    main()
