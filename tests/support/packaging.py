"""Shared by the tests of packaging in more than one tier."""

from __future__ import annotations

from .paths import REPO

ROOT = REPO
PRODUCT = {
    "app",
    "api",
    "controller",
    "metrics",
    "reconcilers",
    "runtimes",
    "webhook",
    "objtypes.py",
}
SOURCES = ["pyproject.toml", "README.md", "packaging", "testserver", *sorted(PRODUCT)]
