"""The bench's printed tables (bench/report.py), read back by title."""

from __future__ import annotations

import re


def tables(text: str) -> dict[str, list[list[str]]]:
    """The printed tables by title: their data rows, cells split where report.table puts
    two spaces or more."""
    found: dict[str, list[list[str]]] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if i + 2 < len(lines) and re.fullmatch(r"[- ]*-", lines[i + 2]):
            rows = []
            for row in lines[i + 3 :]:
                if not row.strip():
                    break
                rows.append(re.split(r"\s{2,}", row.strip()))
            found[line] = rows
    return found


def table_titled(text: str, start: str) -> list[list[str]]:
    matches = [rows for title, rows in tables(text).items() if title.startswith(start)]
    assert len(matches) == 1, f"no single table titled {start!r} in:\n{text}"
    return matches[0]
