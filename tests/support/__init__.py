"""Helpers and fixtures shared by several test modules: test modules import these (and
conftest), never each other (scripts/check_imports.py checks it)."""
