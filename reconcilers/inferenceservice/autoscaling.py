"""spec.autoscaling: a HorizontalPodAutoscaler on the InferenceService's scale subresource.

The HPA scales the InferenceService, not its Deployment: it writes `spec.replicas`
through the scale subresource (which reports `status.replicas` and the pods' selector),
and the reconciler sizes the Deployment from that as from any `replicas`. So the
GPUQuota still decides how many of the replicas the HPA asks for may run, and the
controller and the HPA never write the same field: the controller never writes
`spec.replicas`. (LLMKube points its HPA at the Deployment, where a quota could not cap
it.) With no metrics given, the HPA follows the runtime's own count of requests in
flight, as LLMKube's default, at an average of 2 per pod.

The HPA is removed when `autoscaling` is cleared and while the service is suspended:
its minReplicas would otherwise scale a suspended service back up.
"""

from __future__ import annotations

from api import InferenceServiceSpec
from api.autoscaling import Autoscaling, Metric
from controller.cache import Cache
from controller.kube import KubeClient
from controller.resources import HORIZONTAL_POD_AUTOSCALER, INFERENCE_SERVICE
from objtypes import Obj
from reconcilers.ownership import owned_metadata
from reconcilers.writes.apply import ensure_or_remove

# Each runtime's gauge of requests being served (LLMKube's DefaultHPAMetric).
DEFAULT_METRIC = {
    "llamacpp": "llamacpp:requests_processing",
    "vllm": "vllm:num_requests_running",
    "sglang": "sglang:num_requests_running",
    "tgi": "tgi:queue_size",
}
DEFAULT_TARGET = "2"


def _metric(m: Metric) -> Obj:
    if m.type == "Pods":
        return {
            "type": "Pods",
            "pods": {
                "metric": {"name": m.name},
                "target": {"type": "AverageValue", "averageValue": m.target_average_value},
            },
        }
    return {
        "type": "Resource",
        "resource": {
            "name": m.name,
            "target": {"type": "Utilization", "averageUtilization": m.target_average_utilization},
        },
    }


def build_autoscaler(isvc: Obj, service: InferenceServiceSpec, scaling: Autoscaling) -> Obj:
    name = isvc["metadata"]["name"]
    metrics = [_metric(m) for m in scaling.metrics] or [
        _metric(Metric("Pods", DEFAULT_METRIC[service.runtime], DEFAULT_TARGET))
    ]
    return {
        "apiVersion": HORIZONTAL_POD_AUTOSCALER.api_version,
        "kind": HORIZONTAL_POD_AUTOSCALER.kind,
        "metadata": owned_metadata(isvc, name, service.model_ref),
        "spec": {
            "scaleTargetRef": {
                "apiVersion": INFERENCE_SERVICE.api_version,
                "kind": INFERENCE_SERVICE.kind,
                "name": name,
            },
            "minReplicas": scaling.min_replicas,
            "maxReplicas": scaling.max_replicas,
            "metrics": metrics,
        },
    }


async def ensure_autoscaler(
    client: KubeClient, cache: Cache, isvc: Obj, service: InferenceServiceSpec
) -> None:
    """The HPA the spec asks for, or none. Raises NotOwned for an HPA of that name that
    is not ours (it is left alone)."""
    scaling = None if service.suspend else service.autoscaling
    desired = build_autoscaler(isvc, service, scaling) if scaling is not None else None
    await ensure_or_remove(client, cache, HORIZONTAL_POD_AUTOSCALER, isvc, desired)
