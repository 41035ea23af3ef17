"""The three controllers (a package each) and the subjects they share (quota, sources,
devices, writes), over the context, settings and ownership every controller uses."""

from reconcilers.gpuquota.reconciler import GPUQuotaReconciler
from reconcilers.inferenceservice.reconciler import InferenceServiceReconciler
from reconcilers.model.reconciler import ModelReconciler

__all__ = ["GPUQuotaReconciler", "InferenceServiceReconciler", "ModelReconciler"]
