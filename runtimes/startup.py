"""Relations between values that a runtime checks as it starts, before it loads a model,
and exits on: the controller checks the same relation before a pod exists (refused with
InvalidRuntimeConfig, by runtimes/checks.py). Each rule names the runtime's own file and
function it follows.

- SGLang 0.5.23, python/sglang/srt/arg_groups/parallel_hook.py: attention and MoE data
  parallel sizes that must divide the tensor-parallel size, prefill / decode context
  parallelism's options.
- llama.cpp b10068, tools/server/server-http.cpp: the Vertex AI env (AIP_MODE,
  AIP_HTTP_PORT) that moves or breaks the port.
"""

from __future__ import annotations

import re

from api import InferenceServiceSpec
from runtimes.command import RuntimeCommand
from runtimes.flags import int_value, normalize_user_args, user_args
from runtimes.options import resolve


def _where(runtime: str, service: InferenceServiceSpec, option: str, field: str | None) -> str:
    """Where an option's value comes from: the user's extraArgs win over the typed field."""
    extra = user_args(runtime, normalize_user_args(runtime, service.extra_args))
    if extra.value(option) is not None or field is None:
        return f"spec.extraArgs ({option})"
    return f"spec.{field} ({option})"


def sglang_problems(service: InferenceServiceSpec, rt: RuntimeCommand) -> list[str]:
    """Relations SGLang 0.5.23 asserts while it resolves its arguments, before it loads
    anything (python/sglang/srt/arg_groups/parallel_hook.py, run by pipeline.py)."""
    opts = user_args("sglang", tuple(rt.args))
    tp = int_value(opts.value("--tp-size")) or 1
    problems = []
    # handle_deprecated_dp_attention turns `--enable-dp-attention --dp-size N` into
    # --attn-dp-size N (where --attn-dp-size is 1); handle_data_parallelism then asserts
    # `tp_size % attn_dp_size == 0`: each attention group takes an equal share of the TP ranks.
    attn_dp, option = int_value(_last_value("--attn-dp-size", rt)) or 1, "--attn-dp-size"
    if attn_dp == 1 and "--enable-dp-attention" in rt.args:
        attn_dp, option = int_value(opts.value("--dp-size")) or 1, "--dp-size"
    if attn_dp > 1 and tp % attn_dp:
        field = "sglangConfig.dataParallelSize" if option == "--dp-size" else None
        problems.append(
            _not_a_multiple(
                _where("sglang", service, option, field),
                f"attention data parallelism ({option} {attn_dp}"
                + (" with --enable-dp-attention)" if option == "--dp-size" else ")"),
                attn_dp,
                tp,
                "handle_data_parallelism asserts tp_size % attn_dp_size == 0",
            )
        )
    # handle_context_parallelism: `--moe-dp-size` > 1 asserts tp_size % moe_dp_size == 0.
    moe_dp = int_value(_last_value("--moe-dp-size", rt)) or 1
    if moe_dp > 1 and tp % moe_dp:
        problems.append(
            _not_a_multiple(
                _where("sglang", service, "--moe-dp-size", None),
                f"MoE data parallelism (--moe-dp-size {moe_dp})",
                moe_dp,
                tp,
                "handle_context_parallelism asserts tp_size % moe_dp_size == 0",
            )
        )
    # handle_context_parallelism: --enable-prefill-cp without --cp-strategy raises
    # "--cp-strategy must be set when --enable-prefill-cp is enabled".
    prefill_cp = _given("--enable-prefill-cp", rt)
    if prefill_cp and not _given("--cp-strategy", rt):
        problems.append(
            f"{_where('sglang', service, '--enable-prefill-cp', None)}: --enable-prefill-cp "
            "needs --cp-strategy (SGLang 0.5.23 handle_context_parallelism raises "
            "'--cp-strategy must be set when --enable-prefill-cp is enabled' and exits): "
            "add --cp-strategy with one of its values, or drop --enable-prefill-cp"
        )
    # handle_decode_context_parallelism: --dcp-size below 1, or above 1 beside prefill CP.
    dcp_raw = _last_value("--dcp-size", rt)
    dcp = int_value(dcp_raw)
    if dcp is not None and dcp < 1:
        problems.append(
            f"spec.extraArgs (--dcp-size): {dcp_raw!r} is below 1, and SGLang 0.5.23 "
            "handle_decode_context_parallelism raises on it and exits: give 1 or more"
        )
    elif dcp is not None and dcp > 1 and prefill_cp:
        problems.append(
            f"spec.extraArgs (--dcp-size): --dcp-size {dcp} with --enable-prefill-cp: SGLang "
            "0.5.23 handle_decode_context_parallelism raises '--dcp-size > 1 does not "
            "support --enable-prefill-cp' and exits: drop one of them"
        )
    return problems


def _given(option: str, rt: RuntimeCommand) -> bool:
    """Whether SGLang's parser reads `option` in the argv (any spelling it resolves)."""
    return any(o.option == option for o in resolve("sglang", tuple(rt.args)))


# std::stoi's view of a port: leading space, a sign, then digits (the rest is ignored).
_STOI = re.compile(r"^[ \t\n\v\f\r]*[+-]?\d+")


def llamacpp_env_problems(service: InferenceServiceSpec, rt: RuntimeCommand) -> list[str]:
    """llama-server b10068's Vertex AI compatibility (tools/server/server-http.cpp,
    gcp_params and server_http_context::init) reads the container's env at start:
    AIP_HTTP_PORT goes through std::stoi whatever the mode (a value with no leading
    number throws and the server exits), and AIP_MODE=PREDICTION makes it listen on
    AIP_HTTP_PORT (default 8080) instead of --port."""
    # The last entry of a name wins, as the kubelet does; a valueFrom is unknown here.
    env = {e.get("name"): e.get("value") if "valueFrom" not in e else None for e in service.pod.env}
    where = {e.get("name"): i for i, e in enumerate(service.pod.env)}
    problems = []
    aip_port = env.get("AIP_HTTP_PORT")
    match = _STOI.match(aip_port) if isinstance(aip_port, str) and aip_port else None
    if isinstance(aip_port, str) and aip_port and (match is None or not _is_int32(match[0])):
        problems.append(
            f"spec.env[{where['AIP_HTTP_PORT']}]: AIP_HTTP_PORT={aip_port!r} is read by "
            "llama-server b10068 at start with std::stoi, which throws on it (not a 32-bit "
            "number) and the server exits: give a port number, or drop it"
        )
    elif env.get("AIP_MODE") == "PREDICTION":
        listens = str(int(match[0])) if match else "8080"
        port = user_args("llamacpp", tuple(rt.args)).value("--port")
        if port is not None and listens != port:
            problems.append(
                f"spec.env[{where['AIP_MODE']}]: AIP_MODE=PREDICTION makes llama-server b10068 "
                f"listen on AIP_HTTP_PORT ({listens}) instead of --port {port} (its Vertex AI "
                "mode): the container port, probes and Service would miss it. Set "
                f"AIP_HTTP_PORT to {port}, or drop AIP_MODE"
            )
    return problems


def _is_int32(text: str) -> bool:
    return -(2**31) <= int(text) < 2**31


def _last_value(option: str, rt: RuntimeCommand) -> str | None:
    """The value SGLang's parser keeps for an option we do not write (the last one)."""
    values = [o.value for o in resolve("sglang", tuple(rt.args)) if o.option == option]
    return values[-1] if values else None


def _not_a_multiple(where: str, what: str, size: int, tp: int, assertion: str) -> str:
    fit = size * -(-tp // size)  # the next tensor-parallel size that size divides
    divisors = [d for d in range(1, tp + 1) if tp % d == 0]
    return (
        f"{where}: {what} needs the tensor-parallel size (the pod's GPUs, --tp-size) to be "
        f"a multiple of {size}, and it is {tp}: SGLang 0.5.23 {assertion} at start and "
        f"exits. Serve it with {fit} GPUs per pod (tensor parallel {fit}), or a size "
        f"that divides {tp} ({', '.join(map(str, divisors))})"
    )
