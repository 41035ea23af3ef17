"""Other projects' CRDs, from their own Go modules (the cluster and server tiers install them).

`go mod download` puts a module in Go's module cache (downloaded once, from the module
proxy only, as scripts/build-kube.sh fetches Kubernetes), and the CRD files are read from
there as each project ships them:

- Gateway API (sigs.k8s.io/gateway-api v1.5.1, the standard channel): GatewayClass, Gateway;
- Envoy Gateway (github.com/envoyproxy/gateway v1.8.1, LLMKube's pin): Backend;
- Envoy AI Gateway (github.com/envoyproxy/ai-gateway v1.0.0): AIServiceBackend,
  AIGatewayRoute. LLMKube pins v0.7.0, which the proxy refuses (403); these two CRDs are
  the same text in both releases, and v1.0.0 requires the two versions above;
- Pyrra (github.com/pyrra-dev/pyrra v0.10.1, the release LLMKube's SLO guide names):
  ServiceLevelObjective.

Where go or the proxy is missing, ModuleUnavailable says why and the test skips with it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

# Envoy AI Gateway v1.0.0's go.mod requires Envoy Gateway v1.8.1 and Gateway API v1.5.1.
GATEWAY_API = ("sigs.k8s.io/gateway-api", "v1.5.1")
ENVOY_GATEWAY = ("github.com/envoyproxy/gateway", "v1.8.1")
AI_GATEWAY = ("github.com/envoyproxy/ai-gateway", "v1.0.0")
PYRRA = ("github.com/pyrra-dev/pyrra", "v0.10.1")
DOWNLOAD_TIMEOUT = 600.0  # the first download on a fresh machine: tens of MB


class ModuleUnavailable(Exception):
    """A module could not be had (no go, the proxy refused it, no network)."""


def module_dir(module: str, version: str) -> Path:
    """The module's folder in Go's module cache, downloaded first if need be."""
    go = shutil.which("go")
    if go is None:
        raise ModuleUnavailable(f"{module}@{version}: go is not installed")
    env = {**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}
    try:
        run = subprocess.run(
            [go, "mod", "download", "-json", f"{module}@{version}"],
            capture_output=True,
            text=True,
            timeout=DOWNLOAD_TIMEOUT,
            env=env,
            cwd=Path.home(),  # outside any module: nothing else is resolved
        )
    except subprocess.TimeoutExpired:
        raise ModuleUnavailable(f"{module}@{version}: go mod download timed out") from None
    try:
        answer = json.loads(run.stdout or "{}")
    except ValueError:
        answer = {}
    if answer.get("Error") or not answer.get("Dir"):
        why = answer.get("Error") or run.stderr.strip() or f"exit code {run.returncode}"
        raise ModuleUnavailable(f"go mod download {module}@{version}: {why}")
    return Path(answer["Dir"])


def gateway_api_crds() -> list[Path]:
    """GatewayClass and Gateway, Gateway API's standard channel."""
    base = module_dir(*GATEWAY_API) / "config" / "crd" / "standard"
    return [
        base / f"gateway.networking.k8s.io_{kind}.yaml" for kind in ("gatewayclasses", "gateways")
    ]


def envoy_gateway_backend_crd() -> Path:
    """Envoy Gateway's Backend (gateway.envoyproxy.io/v1alpha1), as its chart ships it."""
    return (
        module_dir(*ENVOY_GATEWAY)
        / "charts/gateway-helm/charts/crds/crds/generated/gateway.envoyproxy.io_backends.yaml"
    )


def ai_gateway_crds() -> list[Path]:
    """AIServiceBackend and AIGatewayRoute (served as v1alpha1 and v1beta1)."""
    base = module_dir(*AI_GATEWAY) / "manifests/charts/ai-gateway-crds-helm/templates"
    return [
        base / f"aigateway.envoyproxy.io_{kind}.yaml"
        for kind in ("aiservicebackends", "aigatewayroutes")
    ]


def pyrra_crd() -> Path:
    """Pyrra's ServiceLevelObjective, as its Kubernetes manifests install it."""
    return (
        module_dir(*PYRRA)
        / "examples/kubernetes/manifests/setup/pyrra-slo-CustomResourceDefinition.yaml"
    )
