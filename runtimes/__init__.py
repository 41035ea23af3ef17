"""What each pinned runtime release accepts, and how its argv, image and probes are built (pure)."""
