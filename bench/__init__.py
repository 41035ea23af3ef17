"""Benchmarks (`make bench`): the product, kopf and a minimal loop on the same API server."""
