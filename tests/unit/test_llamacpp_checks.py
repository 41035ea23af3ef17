"""llama.cpp specs llama-server would exit on are refused, naming the field; flash attention
is served on CPU models; llama.cpp pods get a liveness probe.

tests/unit/test_llama_server_real.py shows the same specs failing (and the accepted ones
serving) under the real llama-server.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_llamacpp_checks.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from api import InvalidSpec, parse_inference_service, parse_model
from api.inferenceservice import LLAMACPP_CACHE_TYPES
from objtypes import Obj
from reconcilers.inferenceservice.scope import scope_for
from reconcilers.inferenceservice.workload import pod_spec
from runtimes.problems import INVALID_RUNTIME_CONFIG, runtime_problems
from tests.support.webhook import admission_request
from webhook.admission import verdict

ISVC = {"metadata": {"name": "svc", "namespace": "ns", "uid": "u"}}
GGUF = "https://example.com/m.gguf"  # the loader puts it at /models/m.gguf
CPU_MODEL = parse_model({"source": GGUF, "format": "gguf", "hardware": {"accelerator": "cpu"}})


def errors(**spec: Any) -> list[str]:
    try:
        parse_inference_service({"modelRef": "m", **spec})
    except InvalidSpec as e:
        return e.errors
    return []


def problems(**spec: Any) -> list[str]:
    service = parse_inference_service({"modelRef": "m", **spec})
    return [f"{p.reason}: {p.message}" for p in runtime_problems(service, CPU_MODEL, GGUF)]


def container(**spec: Any) -> Obj:
    service = parse_inference_service({"modelRef": "m", **spec})
    c: Obj = pod_spec(scope_for(ISVC, service, CPU_MODEL))["containers"][0]
    return c


def admission(**spec: Any) -> tuple[bool, str]:
    return verdict(admission_request("InferenceService", {"modelRef": "m", **spec}))


@pytest.mark.parametrize("field", ["cacheTypeK", "cacheTypeV"])
def test_cache_types_outside_llamacpps_list_are_refused(field: str) -> None:
    assert errors(**{field: "fp8"}) == [
        f"spec.{field}: 'fp8' is not one of {', '.join(LLAMACPP_CACHE_TYPES)}"
    ]
    allowed, message = admission(**{field: "fp8"})
    assert not allowed and f"spec.{field}: 'fp8'" in message
    for t in LLAMACPP_CACHE_TYPES:
        assert errors(**{field: t, "flashAttention": True}) == []


@pytest.mark.parametrize("v", ["q8_0", "q4_0", "iq4_nl"])
def test_quantized_v_cache_without_flash_attention_is_refused(v: str) -> None:
    (error,) = errors(cacheTypeV=v, flashAttention=False)
    assert error.startswith("spec.cacheTypeV: a quantized V cache needs flash attention")
    allowed, message = admission(cacheTypeV=v, flashAttention=False)
    assert not allowed and message == error
    # On, or unset (llama.cpp's auto turns it on), or another runtime: accepted.
    assert errors(cacheTypeV=v, flashAttention=True) == []
    assert errors(cacheTypeV=v) == []
    assert errors(cacheTypeV=v, flashAttention=False, runtime="vllm") == []
    # A quantized K cache alone needs no flash attention.
    assert errors(cacheTypeK=v, cacheTypeV="f16", flashAttention=False) == []


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"extraArgs": ["-ctk", "fp8"]}, "spec.cacheTypeK (or --cache-type-k in extraArgs)"),
        ({"extraArgs": ["--cache-type-v=turbo3"]}, "spec.cacheTypeV (or --cache-type-v"),
        ({"cacheTypeV": "q8_0", "extraArgs": ["-fa", "off"]}, "spec.cacheTypeV / spec.flash"),
        ({"flashAttention": False, "extraArgs": ["-ctv", "q4_1"]}, "spec.cacheTypeV / spec.fl"),
        ({"extraArgs": ["-ctv", "q5_0", "--flash-attn", "false"]}, "spec.cacheTypeV / spec.f"),
    ],
)
def test_extra_args_spellings_are_checked_on_the_argv(spec: Obj, field: str) -> None:
    (problem,) = problems(**spec)
    assert problem.startswith(f"{INVALID_RUNTIME_CONFIG}: {field}")


def test_accepted_cache_settings_pass_the_argv_checks() -> None:
    assert problems(cacheTypeK="q8_0", cacheTypeV="q8_0") == []
    assert problems(cacheTypeV="q8_0", extraArgs=["-fa", "on"]) == []
    assert problems(flashAttention=False, extraArgs=["-ctk", "q4_0"]) == []


@pytest.mark.parametrize(("on", "value"), [(True, "on"), (False, "off")])
def test_flash_attention_is_served_on_cpu_models(on: bool, value: str) -> None:
    args = container(flashAttention=on)["args"]
    assert args[args.index("--flash-attn") + 1] == value
    assert "--flash-attn" not in container()["args"]  # unset: llama.cpp's auto


def test_llamacpp_pods_get_a_liveness_probe_on_the_served_port() -> None:
    c = container(extraArgs=["--port", "9000"])
    probe = c["livenessProbe"]
    assert probe["httpGet"] == {"path": "/health", "port": "http"}
    assert probe["periodSeconds"] == 15 and probe["timeoutSeconds"] == 5
    assert probe["failureThreshold"] == 3
    assert c["ports"] == [{"name": "http", "containerPort": 9000, "protocol": "TCP"}]
    assert c["startupProbe"]["httpGet"] == probe["httpGet"]  # liveness starts after it


@pytest.mark.parametrize(
    "extra",
    [["--cache-type-k", "fp8"], ["-ctv=q4_0", "-fa", "off"], ["--cache_type_v", "turbo3"]],
)
def test_the_webhook_refuses_what_llama_server_exits_on_in_extra_args(extra: list[str]) -> None:
    """The same rule as the reconcile (runtimes/arg_errors.py), so the webhook denies it too."""
    allowed, message = admission(runtime="llamacpp", extraArgs=extra)
    assert not allowed and "spec.cacheType" in message, message
