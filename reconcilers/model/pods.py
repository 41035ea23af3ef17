"""A Model's pods (serving pods and prefetch Job pods), found through the cache's index by
the model label.

Every pod that runs a loader for a Model carries MODEL_LABEL = the Model's name; the
cache files pods under it (controller/cache.py `add_index`), so a Model's reconcile reads
its loaders' pods instead of every pod of the namespace.
"""

from __future__ import annotations

from controller.cache import Cache
from controller.resources import POD
from objtypes import Obj
from reconcilers.ownership import MODEL_LABEL

BY_MODEL = "model"


def model_of(pod: Obj) -> list[str]:
    """The index function: the Model the pod loads, by our label."""
    value = (pod.get("metadata", {}).get("labels") or {}).get(MODEL_LABEL)
    return [value] if isinstance(value, str) and value else []


def index_model_pods(cache: Cache) -> None:
    cache.add_index(POD, BY_MODEL, model_of)


def model_pods(cache: Cache, namespace: str, name: str) -> list[Obj]:
    """Every cached pod in the namespace labelled with the Model's name."""
    return cache.by_index(POD, BY_MODEL, name, namespace)
