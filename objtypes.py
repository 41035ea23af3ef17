"""The one alias for a Kubernetes object as decoded JSON, shared by every package.

A top-level leaf that imports only typing: api/ and metrics/ may import nothing of ours
and testserver/ stands apart, so no package of ours is low enough to hold it; a leaf
cannot make an upward import or a cycle (scripts/check_imports.py allows it everywhere).
"""

from typing import Any, TypeAlias

Obj: TypeAlias = dict[str, Any]
