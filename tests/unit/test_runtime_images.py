"""Chart runtimeImages reach the controller and override the pinned serving images."""

from __future__ import annotations

import json

import jsonschema
import pytest

from api import parse_inference_service, parse_model
from app.cli import parse
from objtypes import Obj
from runtimes import images
from tests.support.chart import find, render
from tests.support.paths import REPO

SCHEMA = REPO / "charts" / "llmkube" / "values.schema.json"


def _env(values: Obj | None) -> dict[str, str]:
    dep = find(render(values), "Deployment")
    container = dep["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def test_chart_runtime_images_override_the_pins(monkeypatch: pytest.MonkeyPatch) -> None:
    """The chart's env reaches the operator's Settings (app/cli.py), and from there the
    image of the pods the reconciler builds; runtimes/ reads no environment."""
    env = _env({"runtimeImages": {"vllm": {"rocm": "mirror/vllm-rocm:0.34.0"}}})
    monkeypatch.setenv(images.OVERRIDES_ENV, env[images.OVERRIDES_ENV])
    chart = parse([]).runtime_images
    amd = parse_model(
        {
            "source": "Qwen/Qwen3-8B",
            "format": "safetensors",
            "hardware": {"accelerator": "rocm", "gpu": {"count": 1, "vendor": "amd"}},
        }
    )
    vllm = parse_inference_service({"modelRef": "m", "runtime": "vllm"})
    assert images.image_for(amd, vllm, chart) == "mirror/vllm-rocm:0.34.0"
    assert images.image_for(amd, vllm) == images.PINS["vllm"]["rocm"]  # no overrides given
    tgi = parse_inference_service({"modelRef": "m", "runtime": "tgi"})
    assert images.image_for(amd, tgi, chart) == images.PINS["tgi"]["rocm"]  # empty: the pin


@pytest.mark.parametrize(
    "raw, problem",
    [
        ("{", "not JSON"),
        ("[]", "must be an object"),
        ('{"ollama": {}}', "unknown runtime 'ollama'"),
        ('{"vllm": {"tpu": "x:1"}}', "LLMKUBE_RUNTIME_IMAGES.vllm.tpu: not a variant's image"),
        ('{"vllm": "x:1"}', "LLMKUBE_RUNTIME_IMAGES.vllm: must be an object"),
    ],
)
def test_a_bad_runtime_images_value_stops_the_command_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], raw: str, problem: str
) -> None:
    monkeypatch.setenv(images.OVERRIDES_ENV, raw)
    with pytest.raises(SystemExit) as exited:
        parse([])
    assert exited.value.code == 2
    assert problem in capsys.readouterr().err


def test_default_values_keep_every_pin() -> None:
    raw = _env(None)[images.OVERRIDES_ENV]
    assert images.OVERRIDES_ENV and raw
    # all empty by default: nothing overrides a pin
    assert all(not v for variants in json.loads(raw).values() for v in variants.values())


def test_schema_rejects_unknown_runtimes_and_variants() -> None:
    schema = json.loads(SCHEMA.read_text())
    jsonschema.validate({"runtimeImages": {"vllm": {"cpu": "x:1"}}}, schema)
    bad: Obj
    for bad in ({"runtimeImages": {"ollama": {}}}, {"runtimeImages": {"vllm": {"tpu": "x"}}}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
