"""The one error a spec can raise: every problem found, each naming its field path."""

from __future__ import annotations


class InvalidSpec(ValueError):
    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors
