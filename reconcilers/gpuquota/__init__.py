"""The GPUQuota controller: GPUs charged per replica against each quota."""
