"""A kubeconfig exec plugin for the tests: mints tokens from the test API server.

Run as `python tests/support/exec_plugin.py` with, from the kubeconfig's `env`:
LLMKUBE_TEST_SERVER (the server URL), LLMKUBE_TEST_TTL (token lifetime in seconds),
LLMKUBE_TEST_RUNS (a file each run appends KUBERNETES_EXEC_INFO to, one line), and
optionally LLMKUBE_TEST_BOGUS=1 (hand out a token the server never minted) and
LLMKUBE_TEST_NO_EXPIRY=1 (leave out status.expirationTimestamp), or
LLMKUBE_TEST_CERT_DIR (hand out the client certificate NAME.crt and key NAME.key of
that directory, NAME read from its file `current`, expiring after the TTL).
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import urllib.request
from pathlib import Path


def main() -> int:
    info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
    with open(os.environ["LLMKUBE_TEST_RUNS"], "a") as runs:
        runs.write(json.dumps(info) + "\n")
    if cert_dir := os.environ.get("LLMKUBE_TEST_CERT_DIR"):
        name = Path(cert_dir, "current").read_text().strip()
        expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(
            seconds=float(os.environ["LLMKUBE_TEST_TTL"])
        )
        status = {
            "clientCertificateData": Path(cert_dir, f"{name}.crt").read_text(),
            "clientKeyData": Path(cert_dir, f"{name}.key").read_text(),
            "expirationTimestamp": expires.isoformat(),
        }
    elif os.environ.get("LLMKUBE_TEST_BOGUS"):
        status = {"token": "never-minted"}
    else:
        request = urllib.request.Request(
            os.environ["LLMKUBE_TEST_SERVER"] + "/_testserver/tokens",
            data=json.dumps({"ttl": float(os.environ["LLMKUBE_TEST_TTL"])}).encode(),
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            status = json.load(answer)
        if os.environ.get("LLMKUBE_TEST_NO_EXPIRY"):
            del status["expirationTimestamp"]
    json.dump(
        {"apiVersion": info["apiVersion"], "kind": "ExecCredential", "status": status}, sys.stdout
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
