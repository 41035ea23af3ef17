"""Helpers and fixtures shared by several test modules: test modules import these (and
conftest), never each other (tests/imports.py checks it)."""
