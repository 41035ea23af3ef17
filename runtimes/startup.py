"""Relations between values that a runtime checks as it starts, before it loads a model,
and exits on: the controller checks the same relation before a pod exists (refused with
InvalidRuntimeConfig, by runtimes/problems.py). Each rule names the runtime's own file and
function it follows.

- SGLang 0.5.23, python/sglang/srt/arg_groups/parallel_hook.py: attention and MoE data
  parallel sizes that must divide the tensor-parallel size, prefill / decode context
  parallelism's options.
- vLLM 0.34.0: the frontend's flag pairs, the scheduler's token and sequence limits, the
  data-parallel and decode-context-parallel sizes.
- llama.cpp b10068, tools/server/server-http.cpp: the Vertex AI env (AIP_MODE,
  AIP_HTTP_PORT) that moves or breaks the port.
"""

from __future__ import annotations

import re

from api import InferenceServiceSpec
from runtimes.command import RuntimeCommand
from runtimes.parsers import resolve
from runtimes.spellings import int_value, normalize_user_args, user_args

# Other spellings of the options these rules read (the parsers' add_argument calls: vLLM
# vllm/engine/arg_utils.py, SGLang's "--dcp-size / --decode-context-parallel-size").
ALIASES = {
    ("vllm", "--decode-context-parallel-size"): ("--decode-context-parallel-size", "-dcp"),
    ("vllm", "--prefill-context-parallel-size"): ("--prefill-context-parallel-size", "-pcp"),
    ("sglang", "--dcp-size"): ("--dcp-size", "--decode-context-parallel-size"),
}


class _Argv:
    """The argv as the runtime's parser reads it, resolved once for all the rules."""

    def __init__(self, runtime: str, cmd: RuntimeCommand) -> None:
        self.runtime = runtime
        self.options = list(resolve(runtime, tuple(cmd.args)))

    def _names(self, option: str) -> tuple[str, ...]:
        return ALIASES.get((self.runtime, option), (option,))

    def given(self, option: str) -> bool:
        """Whether the parser reads `option` (any spelling it resolves)."""
        names = self._names(option)
        return any(o.option in names for o in self.options)

    def last_value(self, option: str) -> str | None:
        """The value the parser keeps for an option: the last one given."""
        names = self._names(option)
        values = [o.value for o in self.options if o.option in names]
        return values[-1] if values else None

    def switch(self, positive: str) -> bool:
        """A vLLM boolean as its argparse leaves it (vllm/utils/argparse_utils.py: --x,
        and --no-x and the --enable-/--disable- inverse set it off; the last word wins)."""
        stem = positive.removeprefix("--")
        inverse = "--disable-" + stem[7:] if stem.startswith("enable-") else "--enable-" + stem[8:]
        state = False
        for o in self.options:
            if o.option == positive:
                state = True
            elif o.option in (f"--no-{stem}", inverse):
                state = False
        return state


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)


def _next_multiple(size: int, n: int) -> int:
    """The least multiple of size that is at least n."""
    return size * -(-n // size)


def _where(runtime: str, service: InferenceServiceSpec, option: str, field: str | None) -> str:
    """Where an option's value comes from: the user's extraArgs win over the typed field."""
    extra = user_args(runtime, normalize_user_args(runtime, service.extra_args))
    if extra.value(option) is not None or field is None:
        return f"spec.extraArgs ({option})"
    return f"spec.{field} ({option})"


def sglang_problems(service: InferenceServiceSpec, cmd: RuntimeCommand) -> list[str]:
    """Relations SGLang 0.5.23 asserts while it resolves its arguments, before it loads
    anything (python/sglang/srt/arg_groups/parallel_hook.py, run by pipeline.py)."""
    opts, argv = user_args("sglang", tuple(cmd.args)), _Argv("sglang", cmd)
    tp = int_value(opts.value("--tp-size")) or 1
    problems = []
    # handle_deprecated_dp_attention turns `--enable-dp-attention --dp-size N` into
    # --attn-dp-size N (where --attn-dp-size is 1); handle_data_parallelism then asserts
    # `tp_size % attn_dp_size == 0`: each attention group takes an equal share of the TP ranks.
    attn_dp, option = int_value(argv.last_value("--attn-dp-size")) or 1, "--attn-dp-size"
    if attn_dp == 1 and "--enable-dp-attention" in cmd.args:
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
    moe_dp = int_value(argv.last_value("--moe-dp-size")) or 1
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
    prefill_cp = argv.given("--enable-prefill-cp")
    if prefill_cp and not argv.given("--cp-strategy"):
        problems.append(
            f"{_where('sglang', service, '--enable-prefill-cp', None)}: --enable-prefill-cp "
            "needs --cp-strategy (SGLang 0.5.23 handle_context_parallelism raises "
            "'--cp-strategy must be set when --enable-prefill-cp is enabled' and exits): "
            "add --cp-strategy with one of its values, or drop --enable-prefill-cp"
        )
    # handle_decode_context_parallelism: --dcp-size below 1, or above 1 beside prefill CP.
    dcp_raw = argv.last_value("--dcp-size")
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


# std::stoi's view of a port: leading space, a sign, then digits (the rest is ignored).
_STOI = re.compile(r"^[ \t\n\v\f\r]*[+-]?\d+")


def llamacpp_env_problems(service: InferenceServiceSpec, cmd: RuntimeCommand) -> list[str]:
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
        port = user_args("llamacpp", tuple(cmd.args)).value("--port")
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


def _not_a_multiple(where: str, what: str, size: int, tp: int, assertion: str) -> str:
    fit = _next_multiple(size, tp)
    return (
        f"{where}: {what} needs the tensor-parallel size (the pod's GPUs, --tp-size) to be "
        f"a multiple of {size}, and it is {tp}: SGLang 0.5.23 {assertion} at start and "
        f"exits. Serve it with {fit} GPUs per pod (tensor parallel {fit}), or a size "
        f"that divides {tp} ({_divisors(tp)})"
    )


def vllm_problems(service: InferenceServiceSpec, cmd: RuntimeCommand) -> list[str]:
    """Relations vLLM 0.34.0 checks in `vllm serve` before it loads a model: the frontend's
    (vllm/entrypoints/common/cli_args.py validate_parsed_serve_args), the scheduler's
    (vllm/config/scheduler.py SchedulerConfig.verify_max_model_len) and the parallel
    layout's (vllm/config/parallel.py ParallelConfig._validate_parallel_config). Only
    values given explicitly are compared: vLLM fills the unset ones from the hardware."""
    opts, argv = user_args("vllm", tuple(cmd.args)), _Argv("vllm", cmd)
    problems = []
    needs = []
    if argv.switch("--enable-auto-tool-choice") and not argv.last_value("--tool-call-parser"):
        needs.append(("--enable-auto-tool-choice", "--tool-call-parser"))
    if argv.switch("--enable-log-outputs") and not argv.switch("--enable-log-requests"):
        needs.append(("--enable-log-outputs", "--enable-log-requests"))
    for flag, needed in needs:
        problems.append(
            f"spec.extraArgs ({flag}): {flag} requires {needed}, and vLLM 0.34 "
            f"validate_parsed_serve_args raises a TypeError and exits: add {needed}, or drop "
            f"{flag}"
        )
    if argv.switch("--enable-per-request-metrics") and argv.switch("--disable-log-stats"):
        problems.append(
            "spec.extraArgs (--enable-per-request-metrics): it requires engine statistics, "
            "which --disable-log-stats turns off; vLLM 0.34 validate_parsed_serve_args raises "
            "and exits: drop one of them"
        )
    batched = int_value(argv.last_value("--max-num-batched-tokens"))
    seqs = int_value(argv.last_value("--max-num-seqs"))
    if batched is not None and seqs is not None and batched < seqs:
        where = _where(
            "vllm", service, "--max-num-batched-tokens", "vllmConfig.maxNumBatchedTokens"
        )
        problems.append(
            f"{where}: {batched} is below --max-num-seqs {seqs}; vLLM 0.34 "
            "SchedulerConfig.verify_max_model_len requires max_num_batched_tokens >= "
            f"max_num_seqs and exits: give at least {seqs}, or fewer sequences"
        )
    dp = int_value(opts.value("--data-parallel-size")) or 1
    local = int_value(opts.value("--data-parallel-size-local"))
    env_dp = any(e.get("name") == "VLLM_DP_SIZE" for e in service.pod.env)
    if local is not None and local > dp and not (dp == 1 and env_dp):
        problems.append(
            f"spec.extraArgs (--data-parallel-size-local): {local} is more than "
            f"--data-parallel-size {dp}; vLLM 0.34 ParallelConfig._validate_parallel_config "
            f"requires data_parallel_size_local <= data_parallel_size and exits"
        )
    tp = int_value(opts.value("--tensor-parallel-size")) or 1
    dcp = int_value(argv.last_value("--decode-context-parallel-size")) or 1
    pcp = int_value(argv.last_value("--prefill-context-parallel-size")) or 1
    if pcp == 1 and dcp > 1 and tp % dcp:
        problems.append(_dcp_not_a_divisor(tp, dcp))
    return problems


def _dcp_not_a_divisor(tp: int, dcp: int) -> str:
    return (
        f"spec.extraArgs (--decode-context-parallel-size): {dcp} does not divide the "
        f"tensor-parallel size {tp} (the pod's GPUs, --tensor-parallel-size); vLLM 0.34 "
        "ParallelConfig._validate_parallel_config requires tp_size % dcp_size == 0 and "
        f"exits: give one of {_divisors(tp)}, or {_next_multiple(dcp, tp)} GPUs "
        "per pod"
    )
