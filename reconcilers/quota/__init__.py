"""The GPUQuota rule and its incremental index, shared by the GPUQuota and InferenceService
controllers."""
