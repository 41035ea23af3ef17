"""The controller's Manager as the tests run it: in process, on any port, its metrics read."""

from __future__ import annotations

from typing import Any

from app.controllers import reconcilers
from controller.clock import REAL, Clock
from controller.kube import KubeClient
from controller.manager import Manager, ManagerConfig


def manager_for(client: KubeClient, *, clock: Clock = REAL, **overrides: Any) -> Manager:
    config = ManagerConfig(http_port=0, http_host="127.0.0.1", workers=2, watch_timeout=30)
    for key, value in overrides.items():
        setattr(config, key, value)
    return Manager(client, config, reconcilers=reconcilers(), clock=clock)


def reconciles(manager: Manager, controller: str, result: str = "success") -> float:
    """controller_runtime_reconcile_total for one controller and result."""
    value = manager.metrics.registry.get_sample_value(
        "controller_runtime_reconcile_total", {"controller": controller, "result": result}
    )
    return value or 0.0
