"""The composition root: the command lines, the demo and the list of reconcilers.

Everything else is a library this package wires together; nothing imports `app`.
"""
