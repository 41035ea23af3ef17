"""Bearer tokens with an expiry, for the `--require-token` mode.

Short-lived credentials (an exec plugin's 5-second tokens) are tested against this:
`POST /_testserver/tokens {"ttl": 5}` mints one (what a test's exec plugin calls), every
API request must carry a live one, and a missing, unknown, expired or revoked token is
answered as kube-apiserver does: 401 with a Status whose reason is Unauthorized. Watches
are authenticated when they start, so an open watch outlives its token, as on a cluster.
With --client-ca-file, a client certificate signed by that CA authenticates too (its
CN is counted, for tests of certificates handed out by exec plugins).
"""

from __future__ import annotations

import datetime
import secrets
import time
from collections import Counter

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from .errors import error_response

OPEN_PREFIX = "/_testserver/"  # the test controls themselves need no token


class TokenBook:
    def __init__(self) -> None:
        self.expiry: dict[str, float] = {}  # token -> time.time() it stops working
        self.minted = 0
        self.rejected = 0
        # Requests authenticated by a client certificate (--client-ca-file), by its CN.
        self.client_certs: Counter[str] = Counter()

    def mint(self, ttl: float) -> dict[str, str]:
        token = secrets.token_urlsafe(24)
        expires = time.time() + ttl
        self.expiry[token] = expires
        self.minted += 1
        stamp = datetime.datetime.fromtimestamp(expires, datetime.UTC)
        return {"token": token, "expirationTimestamp": stamp.isoformat().replace("+00:00", "Z")}

    def revoke_all(self) -> None:
        self.expiry.clear()

    def valid(self, authorization: str) -> bool:
        scheme, _, token = authorization.partition(" ")
        expires = self.expiry.get(token) if scheme.lower() == "bearer" else None
        return expires is not None and time.time() < expires

    def stats(self) -> dict[str, object]:
        now = time.time()
        live = sum(1 for t in self.expiry.values() if t > now)
        return {
            "minted": self.minted,
            "rejected": self.rejected,
            "live": live,
            "clientCerts": dict(self.client_certs),
        }

    def middleware(self) -> Middleware:
        @web.middleware
        async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
            if request.path.startswith(OPEN_PREFIX) or self.valid(
                request.headers.get("Authorization", "")
            ):
                return await handler(request)
            name = _client_cert_name(request)
            if name is not None:  # verified against --client-ca-file by the TLS layer
                self.client_certs[name] += 1
                return await handler(request)
            self.rejected += 1
            return error_response(401, "Unauthorized", "Unauthorized")

        return authenticate


def _client_cert_name(request: web.Request) -> str | None:
    """The CN of the client certificate the connection was made with, if any."""
    peer = request.transport.get_extra_info("peercert") if request.transport else None
    for rdn in (peer or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None
