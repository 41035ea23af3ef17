"""Condition types and reasons llmkube-py sets, by name (metav1.Condition type/reason)."""

from __future__ import annotations

# Shared
READY = "Ready"
INVALID_SPEC = "InvalidSpec"

# Model
ACCELERATOR_READY = "AcceleratorReady"
RESOURCE_CLAIMS_FOUND = "ResourceClaimsFound"
RESOURCE_CLAIM_NOT_FOUND = "ResourceClaimNotFound"
RESOURCE_CLAIM_TEMPLATE_NOT_FOUND = "ResourceClaimTemplateNotFound"
DEVICE_PLUGIN = "DevicePlugin"
DEVICE_CLASS_NOT_FOUND = "DeviceClassNotFound"
INSUFFICIENT_DEVICES = "InsufficientDevices"
# A claim's request that no published device satisfies (its selector named).
UNSATISFIABLE_REQUEST = "UnsatisfiableRequest"
# KEP-5004: a DeviceClass's extendedResourceName serves the device-plugin limit through DRA.
EXTENDED_RESOURCE_VIA_DRA = "ExtendedResourceViaDRA"
NO_ACCELERATOR_REQUIRED = "NoAcceleratorRequired"
ACCELERATOR_NOT_READY = "AcceleratorNotReady"
MODEL_READY = "Ready"
# A file:// or absolute-path source outside --allowed-host-path-roots (LLMKube's reason);
# Model Ready and InferenceService ModelResolved.
SOURCE_NOT_ALLOWED = "SourceNotAllowed"

# InferenceService
MODEL_RESOLVED = "ModelResolved"
QUOTA_ADMITTED = "QuotaAdmitted"
WORKLOAD_READY = "WorkloadReady"
SUSPENDED = "Suspended"
CLAIMS_PRESENT = "ClaimsPresent"
CLAIMS_PER_POD = "ClaimsPerPod"
KUEUE_COMPATIBLE = "KueueCompatible"
# count (or resources.gpu) against the devices the claims ask for
DEVICE_COUNT = "DeviceCount"
RUNTIME_CONFIGURED = "RuntimeConfigured"
MULTI_NODE_WITH_DRA = "MultiNodeWithDRA"
EXTENDED_RESOURCE_OVERLAP = "ExtendedResourceOverlap"
# A pod of the service was evicted by a NoExecute device taint (KEP-5055).
DEVICE_TAINT_EVICTION = "DeviceTaintEviction"
# reasons
RESOLVED = "Resolved"
ARGV_VALID = "ArgvValid"
MODEL_NOT_FOUND = "ModelNotFound"
MODEL_INVALID = "ModelInvalid"
RUNTIME_NOT_SUPPORTED = "RuntimeNotSupported"
NO_QUOTA = "NoQuota"
WITHIN_QUOTA = "WithinQuota"
QUOTA_EXCEEDED = "QuotaExceeded"
WORKLOAD_CONFLICT = "WorkloadConflict"
SCALED_TO_ZERO = "ScaledToZero"
NOT_SUSPENDED = "NotSuspended"
AVAILABLE = "Available"
SERVING = "Serving"
UNSCHEDULABLE = "Unschedulable"
PROGRESSING = "Progressing"
ALL_CLAIMS_FOUND = "AllClaimsFound"
# DeviceCount: the GPUs come through a ResourceClaimTemplate the controller made.
MANAGED_CLAIMS = "ManagedClaims"
# gpuSharing shared through DRA: no published device of the class allows multiple
# allocations; the shareable devices differ in memory, so a runtime's fraction is unknown.
NO_SHAREABLE_DEVICE = "NoShareableDevice"
AMBIGUOUS_DEVICE_MEMORY = "AmbiguousDeviceMemory"
# rolloutPolicy.waitForIdle: True while a pod-template change is held for busy replicas.
# The reasons while held and IdleTimeoutExceeded / IdleCheckUnsupported are LLMKube's;
# LLMKube removes the condition once the change went ahead, llmkube-py says how it went.
ROLLOUT_DEFERRED = "RolloutDeferred"
PODS_BUSY = "PodsBusy"  # held: a replica is serving a request
IDLE_CHECK_FAILED = "IdleCheckFailed"  # held: a replica's answer could not be read
IDLE_TIMEOUT_EXCEEDED = "IdleTimeoutExceeded"  # went ahead after idleTimeoutSeconds
IDLE_CHECK_UNSUPPORTED = "IdleCheckUnsupported"  # went ahead: no idle signal to wait for
REPLICAS_IDLE = "ReplicasIdle"  # went ahead: every serving replica was idle
FORCED = "Forced"  # went ahead: rolloutPolicy.force
NO_ROLLOUT_PENDING = "NoRolloutPending"  # nothing to hold
WAIT_FOR_IDLE_OFF = "WaitForIdleOff"  # went ahead: waitForIdle was turned off while held

# The Event of a condition's transition is Normal when it turns True, Warning when False;
# these reasons say otherwise (a RolloutDeferred that turns False is mostly good news).
NORMAL_EVENT_REASONS = frozenset({REPLICAS_IDLE, FORCED, NO_ROLLOUT_PENDING, WAIT_FOR_IDLE_OFF})
WARNING_EVENT_REASONS = frozenset({IDLE_CHECK_FAILED})

# GPUQuota
WITHIN_LIMIT = "WithinLimit"
ACCOUNTED = "Accounted"
EXCEEDED = "Exceeded"

# Every object: LLMKube fields the spec sets that llmkube-py stores but does not act on.
FIELDS_SERVED = "FieldsServed"
FIELDS_NOT_SERVED = "FieldsNotServed"
ALL_FIELDS_SERVED = "AllFieldsServed"
# QuotaAdmitted=False: the service's priority is below a covering GPUQuota's minPriority.
BELOW_MIN_PRIORITY = "BelowMinPriority"

# Model delivery (the loader's termination message): the Ready reasons of a loaded Model.
MODEL_CACHED = "ModelCached"  # Ready: a loader staged the files and reported them
DOWNLOAD_PENDING = "DownloadPending"  # no loader has run for this cacheKey yet
DOWNLOAD_STARTED = "DownloadStarted"  # a loader is running
DOWNLOAD_FAILED = "DownloadFailed"  # a loader could not fetch a file
INTEGRITY_CHECK_FAILED = "IntegrityCheckFailed"  # spec.sha256 differs: the file is not used
PREFETCH = "Prefetch"  # condition type: the prefetch Job
PREFETCH_RUNNING = "PrefetchRunning"
PREFETCH_COMPLETE = "PrefetchComplete"
PREFETCH_FAILED = "PrefetchFailed"
PREFETCH_NEEDS_CACHE = "PrefetchNeedsSharedCache"

# spec.slo: the Pyrra ServiceLevelObjective (LLMKube's condition and reasons).
SLO_READY = "SLOReady"
SLO_CREATED = "SLOCreated"
INTEGRATION_DISABLED = "IntegrationDisabled"  # spec.slo set, --enable-pyrra-slo off
PYRRA_NOT_INSTALLED = "PyrraNotInstalled"
INDICATOR_UNSUPPORTED = "IndicatorUnsupportedForRuntime"
RECONCILE_FAILED = "ReconcileFailed"  # the apiserver refused our object
# spec.endpoint.gateway: the Envoy AI Gateway route (LLMKube's condition and reasons).
GATEWAY_READY = "GatewayReady"
EXPOSED = "Exposed"
GATEWAY_CRDS_NOT_INSTALLED = "GatewayCRDsNotInstalled"
# Both (ours): an object of the name we would write exists and is not the service's.
OBJECT_NOT_OWNED = "ObjectNotOwned"
