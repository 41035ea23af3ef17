"""scripts/fetch-runtime-options.py reads parsers into the contract's format.

The readers are run on small sources written in each parser's syntax (clap's Args
struct, llama.cpp's common_arg table, an argparse parser); the output must read back
through the contract test's checker like the committed files do.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path
from types import ModuleType

from tests.support.paths import REPO

SCRIPT = REPO / "scripts" / "fetch-runtime-options.py"


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fetch_runtime_options", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CLAP = """
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Precision {
    /// half
    Float16,
    #[clap(name = "bfloat16")]
    BFloat16,
    MixedFp8,
}

#[derive(Parser, Debug)]
struct Args {
    /// what to load
    #[clap(default_value = "some/model", long, env)]
    model_id: String,
    #[clap(long, env)]
    num_shard: Option<usize>,
    #[clap(long, env, value_enum)]
    dtype: Option<Precision>,
    #[clap(default_value = "3000", long, short, env)]
    port: u16,
    #[clap(long, env)]
    trust_remote_code: bool,
    #[clap(long, env)]
    sharded: Option<bool>,
    #[clap(long, env, value_delimiter = ',')]
    cuda_graphs: Option<Vec<usize>>,
    #[clap(long, env)]
    memory_fraction: f32,
}
"""

ARG_CPP = """
    add_opt(common_arg(
        {"-m", "--model"}, "FNAME",
        "model path (default: [none])",
        [](common_params & params, const std::string & value) {
            params.model.path = value;
        }
    ).set_examples({LLAMA_EXAMPLE_COMMON, LLAMA_EXAMPLE_SERVER}));
    add_opt(common_arg(
        {"-ngl", "--gpu-layers", "--n-gpu-layers"}, "N",
        "layers on the GPU",
        [](common_params & params, int value) {
            params.n_gpu_layers = value;
        }
    ));
    add_opt(common_arg(
        {"--jinja"},
        {"--no-jinja"},
        "use jinja ('{' is fine)",
        [](common_params & params, bool value) {
            params.use_jinja = value;
        }
    ).set_examples({LLAMA_EXAMPLE_SERVER}));
    add_opt(common_arg(
        {"--embedding", "--embeddings"},
        "embeddings only",
        [](common_params & params) {
            params.embedding = true;
        }
    ).set_examples({LLAMA_EXAMPLE_SERVER, LLAMA_EXAMPLE_EMBEDDING}));
    add_opt(common_arg(
        {"--perplexity"},
        "not a server option",
        [](common_params & params) {
            params.ppl = true;
        }
    ).set_examples({LLAMA_EXAMPLE_PERPLEXITY}));
    add_opt(common_arg(
        {"--override-kv"}, "KEY=TYPE:VALUE",
        "override metadata",
        [](common_params & params, const std::string & value) {
            params.kv.push_back(value);
        }
    ).set_excludes({LLAMA_EXAMPLE_BENCH}));
"""


def test_clap_args_and_value_enums() -> None:
    data = script().clap_args(CLAP)
    assert data["enums"] == {"Precision": ["float16", "bfloat16", "mixed-fp8"]}
    o = data["options"]
    assert o["--model-id"] == {
        "short": None,
        "value": "string",
        "choices": None,
        "multiple": False,
        "default": "some/model",
    }
    assert o["--port"]["short"] == "-p" and o["--port"]["value"] == "u16"
    assert o["--dtype"]["value"] == "enum" and o["--dtype"]["choices"][1] == "bfloat16"
    assert o["--trust-remote-code"]["value"] == "flag"
    assert o["--sharded"]["value"] == "bool"
    assert o["--cuda-graphs"]["multiple"] and o["--cuda-graphs"]["value"] == "usize"
    assert o["--memory-fraction"]["value"] == "float"


def test_llamacpp_common_arg_table() -> None:
    o = script().llamacpp_args(ARG_CPP)["options"]
    assert set(o) == {"--model", "--n-gpu-layers", "--jinja", "--embeddings", "--override-kv"}
    assert o["--model"]["aliases"] == ["-m", "--model"] and o["--model"]["kind"] == "string"
    assert o["--n-gpu-layers"]["kind"] == "int"
    assert o["--jinja"]["negative"] == ["--no-jinja"] and o["--jinja"]["kind"] == "bool"
    assert o["--embeddings"]["kind"] == "void" and not o["--embeddings"]["takes_value"]


def test_argparse_dump_matches_the_files_format() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("model_tag", nargs="?")
    p.add_argument("--tensor-parallel-size", "-tp", type=int)
    p.add_argument("--dtype", choices=["auto", "half"])
    p.add_argument("--enforce-eager", action="store_true")
    p.add_argument("--api-key", nargs="+")
    data = script().dump_argparse(p)
    assert data["positionals"] == ["model_tag"]
    o = data["options"]
    assert (
        o["-tp"]
        == o["--tensor-parallel-size"]
        == {
            "takes_value": True,
            "nargs": "None",
            "choices": None,
            "type": "int",
        }
    )
    assert o["--dtype"]["choices"] == ["auto", "half"]
    assert o["--enforce-eager"]["nargs"] == "0" and not o["--enforce-eager"]["takes_value"]
    assert o["--api-key"]["nargs"] == "+"


def test_main_writes_a_file_the_checker_reads(tmp_path: Path) -> None:
    source = tmp_path / "arg.cpp"
    source.write_text(ARG_CPP)
    assert script().main(["llamacpp", "b1", "--source", str(source), "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "llamacpp.json").read_text())
    assert data["version"] == "b1" and "--model" in data["options"]


VLLM_FILES = {
    "vllm/model_executor/layers/quantization/__init__.py": (
        'QuantizationMethods = Literal[\n    "awq",\n    "fp8",\n    "fbgemm_fp8",\n]\n'
        'DEPRECATED_QUANTIZATION_METHODS = [\n    "fbgemm_fp8",\n]\n'
    ),
    "vllm/config/cache.py": 'CacheDType = Literal[\n    "auto",\n    "fp8",\n]\n',
    "vllm/v1/attention/backends/registry.py": (
        "class AttentionBackendEnum(Enum, metaclass=M):\n"
        '    FLASH_ATTN = "a.B"\n    TRITON_ATTN = "c.D"\n    CUSTOM = None\n\n'
        "    @classmethod\n    def register(cls) -> None: ...\n"
    ),
    "vllm/platforms/cuda.py": "class CudaPlatform(Platform):\n    device_name = 'cuda'\n",
    "vllm/platforms/rocm.py": (
        "class RocmPlatform(Platform):\n    supported_quantization: list[str] = [\n"
        '        "awq",\n    ]\n'
    ),
}


def test_vllm_validators_are_read_from_the_release_source(tmp_path: Path) -> None:
    import zipfile

    wheel = tmp_path / "vllm-0.34.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, text in VLLM_FILES.items():
            z.writestr(name, text)
    v = script().vllm_validators(script().wheel_reader(wheel))
    assert v["quantization"] == {
        "methods": ["awq", "fp8", "fbgemm_fp8"],
        "deprecated": ["fbgemm_fp8"],
        "platforms": {"cuda": None, "rocm": ["awq"]},
    }
    assert v["kv_cache_dtypes"] == ["auto", "fp8"]
    assert v["attention_backends"] == ["auto", "FLASH_ATTN", "TRITON_ATTN"]
    # --validators-from writes only that section into an existing vllm.json.
    out = tmp_path / "out"
    out.mkdir()
    (out / "vllm.json").write_text(json.dumps({"version": "0.34.0", "options": {}}))
    script().main(["vllm", "0.34.0", "--validators-from", str(wheel), "--out", str(out)])
    written = json.loads((out / "vllm.json").read_text())
    assert written["options"] == {} and written["validators"]["kv_cache_dtypes"] == ["auto", "fp8"]
