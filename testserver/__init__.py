"""A Kubernetes API server for tests, benchmarks and the local demo.

It speaks the REST protocol a client uses (CRUD, status subresource, patches,
list + watch with resourceVersions, bookmarks, 410 Gone) over in-memory storage and
can inject faults. It runs no admission, scheduling or workload controllers except
the optional cluster simulation used by the demo.
"""
