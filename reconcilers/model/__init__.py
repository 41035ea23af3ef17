"""The Model controller: the hardware request, AcceleratorReady, delivery status, prefetch."""
