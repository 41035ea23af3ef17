"""`llmkube-controller`'s command line: controller-runtime's flags, today's as aliases."""

from __future__ import annotations

import argparse

import pytest

from app.cli import bind_address, parse, parser


def test_run_is_the_default_command_for_any_arguments() -> None:
    assert parse([]).command == "run"
    args = parse(["--workers", "2", "--leader-elect"])
    assert (args.command, args.workers, args.leader_elect) == ("run", 2, True)
    assert parse(["demo"]).command == "demo"


def test_controller_runtime_flags_with_their_defaults() -> None:
    args = parse([])
    assert args.metrics_bind_address == ("0.0.0.0", 8080)
    assert args.health_probe_bind_address == ("0.0.0.0", 8081)
    assert args.log_level == "info"
    args = parse(
        [
            "--metrics-bind-address=127.0.0.1:9090",
            "--health-probe-bind-address",
            ":9091",
            "--zap-log-level=debug",
        ]
    )
    assert args.metrics_bind_address == ("127.0.0.1", 9090)
    assert args.health_probe_bind_address == ("0.0.0.0", 9091)
    assert args.log_level == "debug"
    assert parse(["--metrics-bind-address=0"]).metrics_bind_address is None


def test_earlier_spellings_stay_as_aliases() -> None:
    args = parse(["--http-port", "9000", "--log-level", "warn"])
    assert args.metrics_bind_address == args.health_probe_bind_address == ("0.0.0.0", 9000)
    assert args.log_level == "warning"
    assert parse(["--webhook-cert-path", "/certs"]).webhook_cert_dir == "/certs"


@pytest.mark.parametrize("argv", [["--zap-log-level", "verbose"], ["--log-level=loud"]])
def test_an_unknown_log_level_is_an_error(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse(argv)
    assert exit_.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_bad_bind_addresses_are_errors() -> None:
    for value in ("8080", "host:port", ":70000"):
        with pytest.raises(argparse.ArgumentTypeError):
            bind_address(value)


def test_every_flag_has_help() -> None:
    subparsers = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subparsers.choices.items():
        for action in sub._actions:
            assert action.help, f"{name} {action.option_strings} has no help"


def test_environment_defaults_including_the_earlier_http_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LLMKUBE_HTTP_PORT", "9100")
    monkeypatch.setenv("LLMKUBE_WORKERS", "3")
    args = parse([])
    assert args.metrics_bind_address == args.health_probe_bind_address == ("0.0.0.0", 9100)
    assert args.workers == 3


def test_max_concurrent_reconciles_per_controller() -> None:
    args = parse(["--max-concurrent-reconciles", "model=8,gpuquota=1"])
    assert args.max_concurrent_reconciles == {"model": 8, "gpuquota": 1}
    assert parse([]).max_concurrent_reconciles == {"gpuquota": 2}
    assert parse([]).workers == 16
    with pytest.raises(SystemExit):
        parse(["--max-concurrent-reconciles", "model=0"])


def test_default_fsgroup_is_a_group_id(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse([]).default_fsgroup == 102
    assert parse(["--default-fsgroup=0"]).default_fsgroup == 0
    with pytest.raises(SystemExit):
        parse(["--default-fsgroup=-5"])
    assert "is not a group id" in capsys.readouterr().err


def test_hf_endpoint_flag_env_and_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    assert parse([]).hf_endpoint == "https://huggingface.co"
    monkeypatch.setenv("HF_ENDPOINT", "https://hf-mirror.example/")  # huggingface_hub's name
    assert parse([]).hf_endpoint == "https://hf-mirror.example"
    flag = parse(["--hf-endpoint", "http://10.0.0.5:8080/hub"]).hf_endpoint
    assert flag == "http://10.0.0.5:8080/hub"  # the flag wins over the env


@pytest.mark.parametrize(
    "bad",
    [
        "ftp://mirror",
        "mirror.example",
        "https://user:pw@mirror",
        "https://m/?x=1",
        "https://m/#f",
        "https://",
    ],
)
def test_a_hf_endpoint_that_is_not_a_hub_url_is_an_error(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse(["--hf-endpoint", bad])
    assert "--hf-endpoint" in capsys.readouterr().err
