"""Reading untyped JSON specs into typed values, collecting every error with its field path.

The apiserver's schema validation catches most bad input, but not on a cluster whose
CRDs are older than the controller, and not for objects written before a schema
tightened; the controller therefore checks again and reports all problems at once.
"""

from __future__ import annotations

from typing import Any


class FieldReader:
    def __init__(self, data: Any, path: str, errors: list[str]) -> None:
        self.path = path
        self.errors = errors
        if data is None:
            data = {}
        if not isinstance(data, dict):
            errors.append(f"{path}: must be an object")
            data = {}
        self.data: dict[str, Any] = data

    def _at(self, key: str) -> str:
        return f"{self.path}.{key}"

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def child(self, key: str) -> FieldReader:
        return FieldReader(self.data.get(key), self._at(key), self.errors)

    def text(
        self, key: str, *, required: bool = False, choices: tuple[str, ...] = ()
    ) -> str | None:
        value = self.data.get(key)
        if value is None:
            if required:
                self.errors.append(f"{self._at(key)}: required")
            return None
        if not isinstance(value, str) or (required and not value):
            self.errors.append(f"{self._at(key)}: must be a non-empty string")
            return None
        if choices and value not in choices:
            self.errors.append(f"{self._at(key)}: {value!r} is not one of {', '.join(choices)}")
            return None
        return value

    def boolean(self, key: str, default: bool = False) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.errors.append(f"{self._at(key)}: must be true or false")
            return default
        return value

    def integer(
        self, key: str, *, minimum: int | None = None, maximum: int | None = None
    ) -> int | None:
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.errors.append(f"{self._at(key)}: must be an integer")
            return None
        return value if self._within(key, value, minimum, maximum) else None

    def _within(self, key: str, value: float, minimum: float | None, maximum: float | None) -> bool:
        if minimum is not None and value < minimum:
            self.errors.append(f"{self._at(key)}: must be at least {minimum}, got {value}")
            return False
        if maximum is not None and value > maximum:
            self.errors.append(f"{self._at(key)}: must be at most {maximum}, got {value}")
            return False
        return True

    def number(
        self,
        key: str,
        *,
        above: float | None = None,
        maximum: float | None = None,
        minimum: float | None = None,
    ) -> float | None:
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.errors.append(f"{self._at(key)}: must be a number")
            return None
        if above is not None and value <= above:
            self.errors.append(f"{self._at(key)}: must be greater than {above}, got {value}")
            return None
        return float(value) if self._within(key, value, minimum, maximum) else None

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.data.get(key)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.errors.append(f"{self._at(key)}: must be a list of strings")
            return ()
        return tuple(value)

    def objects(self, key: str) -> list[FieldReader]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self.errors.append(f"{self._at(key)}: must be a list")
            return []
        return [FieldReader(v, f"{self._at(key)}[{i}]", self.errors) for i, v in enumerate(value)]
