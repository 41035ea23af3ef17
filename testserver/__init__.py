"""A Kubernetes API server for tests, benchmarks and the local demo.

It speaks the REST protocol a client uses (CRUD, status and scale subresources, patches,
server-side apply, list + watch with resourceVersions, bookmarks, 410 Gone) over
in-memory storage, enforces CRD schemas (with CEL), calls validating admission webhooks,
collects garbage and can inject faults. It runs no scheduling or workload controllers
except the optional cluster simulation used by the demo.
"""
