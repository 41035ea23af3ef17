"""A network namespace of our own for the real node, and this process moved into it.

The node's address, the pods' bridge and addresses, the Service IPs kube-proxy programs and
the control plane's ports all live inside it: nothing the node does reaches another
network, and nothing collides with another control plane on the host's loopback. The
process that starts the node enters the namespace first (setns(2) on its main thread,
before it starts any other thread), so every component it starts, and every socket it
opens to them, is inside too; `leave()` goes back to the namespace it came from.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

CLONE_NEWNET = 0x40000000
NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
NODE_LINK, PEER_LINK = "node0", "node0-peer"


class NetnsError(RuntimeError):
    pass


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise NetnsError(f"setns: {os.strerror(err)}")


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {done.stderr.strip()}")


@dataclass
class NetworkNamespace:
    """A named namespace (`ip netns add`, so `ip netns exec NAME ...` reaches it by hand)
    with loopback up and the node's address on one end of a veth pair whose two ends both
    stay inside (no route leads out)."""

    name: str
    address: str
    prefix: int = 24
    _home: int | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not NAME.match(self.name):
            raise NetnsError(f"netns name {self.name!r} does not match {NAME.pattern}")

    @property
    def path(self) -> Path:
        return Path("/run/netns") / self.name

    def create(self) -> NetworkNamespace:
        _ip("netns", "add", self.name)
        try:
            n = ("-n", self.name)
            _ip(*n, "link", "set", "lo", "up")
            _ip(*n, "link", "add", NODE_LINK, "type", "veth", "peer", "name", PEER_LINK)
            _ip(*n, "addr", "add", f"{self.address}/{self.prefix}", "dev", NODE_LINK)
            _ip(*n, "link", "set", NODE_LINK, "up")
            _ip(*n, "link", "set", PEER_LINK, "up")
            # A node's default route: locally sent packets to a Service IP need a route
            # before kube-proxy's OUTPUT rules rewrite them (the apiserver calling a
            # webhook Service). Its other end is in this namespace too: nothing leaves.
            _ip(*n, "route", "add", "default", "dev", NODE_LINK)
        except BaseException:
            self.delete()
            raise
        return self

    def enter(self) -> None:
        """Move this process (its calling thread, and every thread and child started
        after) into the namespace."""
        if self._home is None:
            self._home = os.open("/proc/self/ns/net", os.O_RDONLY)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            _setns(fd)
        finally:
            os.close(fd)

    def leave(self) -> None:
        if self._home is None:
            return
        try:
            _setns(self._home)
        finally:
            os.close(self._home)
            self._home = None

    def delete(self) -> None:
        """Remove the namespace; its links, routes and iptables rules go with it."""
        self.leave()
        if self.path.exists():
            subprocess.run(["ip", "netns", "delete", self.name], capture_output=True, check=False)


def inside(name: str) -> bool:
    """Whether this process is in the named namespace now."""
    try:
        return os.stat(f"/run/netns/{name}").st_ino == os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return False
