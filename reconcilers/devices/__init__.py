"""What the cluster's DRA objects and Kueue say about a Model's devices."""
