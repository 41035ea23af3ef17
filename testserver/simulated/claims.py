"""The resourceclaim controller: claims from a pod's templates, released with the pod."""

from __future__ import annotations

import json

from objtypes import Obj

from ..kinds import POD, RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE
from ..storage import StorageError
from .common import Component, pod_owner_ref

POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"


def _claim_base_name(pod_name: str, claim_name: str) -> str:
    """generateName of a template claim, shortened as the resourceclaim controller does."""
    base = f"{pod_name}-{claim_name}-"
    if len(base) <= 57:  # room for five random characters in 63
        return base
    keep = 57 - 2  # two hyphens
    pod_len = len(pod_name) * keep // (len(pod_name) + len(claim_name))
    return f"{pod_name[:pod_len]}-{claim_name[: keep - pod_len]}-"


class ResourceClaimController(Component):
    """Template claims per pod (named as the real controller names them, owned by the pod,
    in pod.status.resourceClaimStatuses); reservations of deleted pods dropped, claims
    nobody reserves deallocated, claims of deleted pods deleted (the garbage collector)."""

    def release(self) -> None:
        """Drop reservations of pods that are gone; deallocate claims nobody reserves;
        delete claims whose owning pod is gone (the garbage collector's part)."""
        pods = {p["metadata"]["uid"] for p in self.storage.select(POD, None, lambda o: True)}
        for claim in self.storage.select(RESOURCE_CLAIM, None, lambda o: True):
            meta = claim["metadata"]
            owners = [r for r in meta.get("ownerReferences") or [] if r.get("kind") == "Pod"]
            if owners and not any(r.get("uid") in pods for r in owners):
                self.storage.delete(RESOURCE_CLAIM, meta["namespace"], meta["name"])
                continue
            status = claim.get("status") or {}
            reserved = status.get("reservedFor") or []
            kept = [r for r in reserved if r.get("uid") in pods]
            if kept == reserved:
                continue
            if kept:
                claim["status"] = {**status, "reservedFor": kept}
            else:
                claim["status"] = {}
            self.write_status(RESOURCE_CLAIM, claim)

    def pod_claim(self, pod: Obj, ref_name: str) -> Obj | None:
        """The claim made for one template entry of the pod, if any (status, then owner)."""
        ns = pod["metadata"]["namespace"]
        for st in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
            if st.get("name") == ref_name and st.get("resourceClaimName"):
                try:
                    return self.storage.get(RESOURCE_CLAIM, ns, st["resourceClaimName"])
                except StorageError:
                    return None
        uid = pod["metadata"]["uid"]
        for claim in self.storage.select(RESOURCE_CLAIM, ns, lambda o: True):
            meta = claim["metadata"]
            if (meta.get("annotations") or {}).get(POD_CLAIM_ANNOTATION) == ref_name and any(
                r.get("uid") == uid for r in meta.get("ownerReferences") or []
            ):
                return claim
        return None

    def create_template_claims(self) -> None:
        for pod in self.storage.select(POD, None, lambda o: True):
            ns = pod["metadata"]["namespace"]
            statuses = []
            for ref in pod["spec"].get("resourceClaims") or []:
                template_name = ref.get("resourceClaimTemplateName")
                if not template_name:
                    continue
                claim = self.pod_claim(pod, ref["name"])
                if claim is None:
                    try:
                        template = self.storage.get(RESOURCE_CLAIM_TEMPLATE, ns, template_name)
                    except StorageError:
                        continue  # the scheduler reports the missing template
                    tmeta = (template.get("spec") or {}).get("metadata") or {}
                    claim = self.storage.create(
                        RESOURCE_CLAIM,
                        ns,
                        {
                            "metadata": {
                                "generateName": _claim_base_name(
                                    pod["metadata"]["name"], ref["name"]
                                ),
                                "labels": dict(tmeta.get("labels") or {}),
                                "annotations": {
                                    **(tmeta.get("annotations") or {}),
                                    POD_CLAIM_ANNOTATION: ref["name"],
                                },
                                "ownerReferences": [pod_owner_ref(pod)],
                            },
                            "spec": json.loads(json.dumps(template["spec"].get("spec") or {})),
                        },
                    )
                statuses.append(
                    {"name": ref["name"], "resourceClaimName": claim["metadata"]["name"]}
                )
            status = pod.get("status") or {}
            if statuses and status.get("resourceClaimStatuses") != statuses:
                self.set_status(pod, {**status, "resourceClaimStatuses": statuses})
