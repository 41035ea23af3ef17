"""Shared by the tests of model_sources in more than one tier."""

from __future__ import annotations

from objtypes import Obj

ROOTS = ("/mnt/models",)


def value(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


# Hostile sources and file names (issue 27 items 1 and 2): a newline that would add a line
# (another URL, a target in another Model's folder, a curl option), '..', a hidden name.
HOSTILE: list[tuple[Obj, str]] = [
    ({"source": "https://h/x.gguf\nhttps://evil/f ../0123456789abcdef/m.gguf"}, "spec.source"),
    ({"source": "https://h/x.gguf\n-K/tmp/evil.cfg y.gguf"}, "spec.source"),
    ({"source": "https://h/x.gguf\n"}, "spec.source"),
    ({"source": "hf://org/repo\r"}, "spec.source"),
    ({"source": "https://h/a/../../b.gguf"}, "spec.source"),
    ({"source": "s3://bkt/k/../../other/m.gguf", "sourceSecretRef": {"name": "c"}}, "spec.source"),
    ({"source": "org/r", "files": ["m.gguf", "../0123456789abcdef/m.gguf"]}, "spec.files[1]"),
    ({"source": "org/r", "files": ["m.gguf", ".m.gguf.sha256"]}, "spec.files[1]"),
    ({"source": "org/r", "files": ["m.gguf\nx"]}, "spec.files[0]"),
    ({"source": "org/r", "files": ["m.gguf"], "mmproj": "/etc/passwd"}, "spec.mmproj"),
]
