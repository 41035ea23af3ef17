"""Device taints (KEP-5055) as a ResourceSlice publishes them, and a request's tolerations.

A device's `taints` (`spec.devices[].taints`: key, value, effect, timeAdded) keep claims
that do not tolerate them off the device: NoSchedule stops new allocations, NoExecute
also makes kube-controller-manager's device-taint-eviction-controller delete the pods
whose allocated claims do not tolerate it (their DisruptionTarget condition says
DeletionByDeviceTaintManager). `None` and effects this code does not know have no
effect, as the API says consumers must treat them. A request tolerates a taint as the
scheduler matches a DeviceToleration: operator Equal (the default) compares key and
value, Exists matches any value (and every key when the key is empty); an empty effect
matches every effect. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
BLOCKING = (NO_SCHEDULE, NO_EXECUTE)
# The reason the device-taint-eviction-controller gives on the DisruptionTarget condition.
EVICTION_REASON = "DeletionByDeviceTaintManager"


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return (
            f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
        )


def device_taints(device: Any) -> tuple[Taint, ...]:
    """The taints of one `spec.devices[]` entry of a ResourceSlice."""
    if not isinstance(device, Mapping):
        return ()
    found = []
    for t in device.get("taints") or []:
        if isinstance(t, Mapping) and isinstance(t.get("key"), str):
            found.append(Taint(t["key"], str(t.get("value") or ""), str(t.get("effect") or "")))
    return tuple(found)


def tolerates(toleration: Any, taint: Taint) -> bool:
    if not isinstance(toleration, Mapping):
        return False
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    if (toleration.get("operator") or "Equal") == "Exists":
        return not key or key == taint.key
    return bool(key == taint.key and (toleration.get("value") or "") == taint.value)


def untolerated(
    taints: Iterable[Taint], tolerations: Any, effects: Iterable[str] = BLOCKING
) -> list[Taint]:
    """The taints with one of `effects` that no toleration of the request tolerates."""
    wanted = set(effects)
    given = tolerations if isinstance(tolerations, list) else []
    return [t for t in taints if t.effect in wanted and not any(tolerates(x, t) for x in given)]


def request_tolerations(claim_spec: Any) -> list[list[Any]]:
    """The tolerations of each request (and each firstAvailable alternative) of a
    ResourceClaimSpec: a device an entry's list does not tolerate may still serve another."""
    found: list[list[Any]] = []
    requests = (
        ((claim_spec or {}).get("devices") or {}).get("requests")
        if isinstance(claim_spec, Mapping)
        else None
    )
    for request in requests or []:
        if not isinstance(request, Mapping):
            continue
        subs = [request["exactly"]] if isinstance(request.get("exactly"), Mapping) else []
        subs += [s for s in request.get("firstAvailable") or [] if isinstance(s, Mapping)]
        found += [list(s.get("tolerations") or []) for s in subs]
    return found


def slice_taints(slices: Iterable[Any]) -> dict[tuple[str, str, str], tuple[Taint, ...]]:
    """(driver, pool, device) -> its taints, for every tainted device the slices publish."""
    found: dict[tuple[str, str, str], tuple[Taint, ...]] = {}
    for s in slices:
        spec = s.get("spec") if isinstance(s, Mapping) else None
        if not isinstance(spec, Mapping):
            continue
        driver = str(spec.get("driver") or "")
        pool = str((spec.get("pool") or {}).get("name") or "")
        for d in spec.get("devices") or []:
            taints = device_taints(d)
            if taints:
                found[(driver, pool, str(d.get("name") or ""))] = taints
    return found


def devices_to_reread(
    allocation: Any, pods: Mapping[str, Mapping[str, Any]]
) -> list[tuple[str, str, str]]:
    """The devices of the pods of `allocation` that are departing (gone, terminating or
    marked by the eviction controller; `pods`: the cached pods by name): whether their
    device was tainted is read afresh, since the slice's watch may lag the pod's and the
    last allocation naming a gone pod is read only once."""
    rows = (allocation or {}).get("pods") if isinstance(allocation, Mapping) else None
    found = []
    for row in rows or []:
        if not isinstance(row, Mapping):
            continue
        if not _departing(pods.get(str(row.get("name") or ""))):
            continue
        for d in row.get("devices") or []:
            if isinstance(d, Mapping):
                found.append(
                    (
                        str(d.get("driver") or ""),
                        str(d.get("pool") or ""),
                        str(d.get("device") or ""),
                    )
                )
    return found


@dataclass(frozen=True)
class Eviction:
    pod: str
    device: str  # driver/pool/device
    taint: Taint

    def __str__(self) -> str:
        return f"pod {self.pod} evicted: device {self.device} has taint {self.taint}"


def _evicted_by_taint(pod: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "DisruptionTarget"
        and c.get("status") == "True"
        and c.get("reason") == EVICTION_REASON
        for c in (pod.get("status") or {}).get("conditions") or []
        if isinstance(c, Mapping)
    )


def _departing(pod: Mapping[str, Any] | None) -> bool:
    """Gone, terminating or marked by the eviction controller: a pod whose device's
    NoExecute taint may be why. Terminating counts without the mark, since a status write
    racing the controller's (kwok's, a kubelet's) can drop its DisruptionTarget condition
    before the pod goes, and the next status no longer lists the pod."""
    if pod is None:
        return True
    return bool((pod.get("metadata") or {}).get("deletionTimestamp")) or _evicted_by_taint(pod)


def evictions(
    allocation: Any,
    pods: Mapping[str, Mapping[str, Any]],
    taints: Mapping[tuple[str, str, str], tuple[Taint, ...]],
    tolerations: list[list[Any]],
) -> list[Eviction]:
    """The pods of a service's last `status.allocation` that a NoExecute device taint
    evicted: a pod the device-taint-eviction-controller marked (DisruptionTarget,
    DeletionByDeviceTaintManager), or one terminating or gone (`pods`: the cached pods by
    name), whose device carries a NoExecute taint no request's tolerations tolerate.
    Each names the pod, the device and the taint."""
    found = []
    rows = (allocation or {}).get("pods") if isinstance(allocation, Mapping) else None
    for row in rows or []:
        if not isinstance(row, Mapping):
            continue
        name = str(row.get("name") or "")
        if not _departing(pods.get(name)):
            continue
        for d in row.get("devices") or []:
            if not isinstance(d, Mapping):
                continue
            key = (str(d.get("driver") or ""), str(d.get("pool") or ""), str(d.get("device") or ""))
            on_device = taints.get(key, ())
            lists = tolerations or [[]]
            # Evicting: the claim tolerates it nowhere (any request that tolerates it
            # may be the one holding this device).
            hit = [
                t
                for t in untolerated(on_device, [], (NO_EXECUTE,))
                if all(untolerated([t], x, (NO_EXECUTE,)) for x in lists)
            ]
            if hit:
                found.append(Eviction(name, "/".join(key), hit[0]))
    return found
