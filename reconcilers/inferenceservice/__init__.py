"""The InferenceService controller: plan, apply and status of the serving workload."""
