"""Model source schemes served as LLMKube does (issue 20 item 1): pvc://, hf://, file:// and
absolute paths, s3://. Each is served with the volume and argument its runtime needs, or
refused with a condition (and at admission) naming spec.source.

Here the tests that need no API server; those that run on the test API server are in
tests/server/test_model_sources.py.
"""

from __future__ import annotations

import hashlib
import hmac
import http.server
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api import InvalidSpec, parse_inference_service, parse_model, rule_errors
from api.schema import go_regex
from api.source import SOURCE_PATTERN
from app.cli import parse
from objtypes import Obj
from reconcilers.inferenceservice.scope import scope_for
from reconcilers.inferenceservice.workload import pod_spec
from reconcilers.sources.loader import SCRIPT
from reconcilers.sources.placement import SourceNotAllowed
from tests.support.model_sources import HOSTILE, ROOTS, value
from tests.support.webhook import admission_request
from testserver.schema import _regex as server_regex
from webhook.admission import verdict

ISVC = {"metadata": {"name": "svc", "namespace": "ns", "uid": "u"}}


def pod(runtime: str, spec: Obj, roots: tuple[str, ...] = ROOTS, **service: Any) -> Obj:
    s = parse_inference_service({"modelRef": "m", "runtime": runtime, **service})
    return pod_spec(scope_for(ISVC, s, parse_model(spec), roots=roots))


def args(p: Obj) -> list[str]:
    result: list[str] = p["containers"][0]["args"]
    return result


# -- parsing: bad sources are refused naming the field ------------------------------


@pytest.mark.parametrize(
    ("source", "error"),
    [
        ("pvc://Bad_Claim/m.gguf", "not a PersistentVolumeClaim name"),
        ("pvc://claim", "give the model's path inside the claim"),
        ("pvc://claim/../other/m.gguf", "'..' is not allowed"),
        ("file://host/m.gguf", "file:///path/to/model"),
        ("/mnt/models/../../etc/passwd", "'..' is not allowed"),
        ("hf://org/repo@bad rev", "holds a space at offset 17"),
        ("hf://org/repo@v1\n", "holds a newline at offset 16"),
        ("https://h/x.gguf\nhttps://evil/f ../k/m.gguf", "holds a newline at offset 16"),
        ("https://h/-K/x.gguf\t", "holds a tab"),
        ("https://h/\x1b[2Jx.gguf", "holds U+001B at offset 10"),
        ("https://h/a/../b.gguf", "'..' is not allowed anywhere"),
        ("https://h/m/.m.gguf.sha256", "starts with '.'"),
        ("https://h/\u00e9.gguf", "in printable ASCII"),
        ("hf://org/repo@refs..x", "'..' is not allowed anywhere"),
        ("hf://org--x/repo", "cannot hold '--' or '..'"),
        ("org/repo/extra", "has more than two segments"),
        ("s3://Bucket_X/k", "not an S3 bucket name"),
        ("s3://bucket/prefix/", "not a prefix"),
    ],
)
def test_a_malformed_source_is_refused_naming_spec_source(source: str, error: str) -> None:
    with pytest.raises(InvalidSpec) as e:
        parse_model({"source": source})
    message = "; ".join(e.value.errors)
    assert message.startswith(f"spec.source: {source!r}: ") and error in message


def test_patterns_match_as_the_apiserver_does() -> None:
    """Go's regexp (the apiserver's) ends `$` at the end of the text; Python's also matches
    before a final newline. The controller and the test server match as Go does."""
    for regex in (go_regex, server_regex):
        assert regex(SOURCE_PATTERN).search("https://h/x.gguf")
        assert not regex(SOURCE_PATTERN).search("https://h/x.gguf\n")
        assert not regex(r"^[a-fA-F0-9]{64}$").search("a" * 64 + "\n")
        assert not regex(r"^\d+-\d+$").search("\u0661-\u0662")  # \d is ASCII in Go
        assert regex(r"^[$]+$").search("$$") and regex(r"^[]a]+$").search("]a")
    with pytest.raises(InvalidSpec) as e:
        parse_model({"source": "org/r", "sha256": "a" * 64 + "\n"})
    assert e.value.errors[0].startswith("spec.sha256: ")


def test_s3_needs_the_secret_with_its_keys() -> None:
    with pytest.raises(InvalidSpec) as e:
        parse_model({"source": "s3://models/m.gguf"})
    assert "spec.sourceSecretRef: an s3:// source needs a Secret" in e.value.errors[0]


# -- hf:// : the repo id, and the revision flag each runtime has ------------------------


@pytest.mark.parametrize(
    ("runtime", "model_flag"),
    [("vllm", "--model"), ("sglang", "--model-path"), ("tgi", "--model-id")],
)
def test_hf_source_is_the_repo_id_and_its_revision(runtime: str, model_flag: str) -> None:
    spec = {"source": "hf://Qwen/Qwen3-8B@refs/pr/3", "format": "safetensors"}
    argv = args(pod(runtime, spec))
    if runtime == "vllm":  # `vllm serve <model>`: the model is the first argument
        assert argv[0] == "Qwen/Qwen3-8B" and model_flag not in argv
    else:
        assert value(argv, model_flag) == "Qwen/Qwen3-8B"
    assert value(argv, "--revision") == "refs/pr/3"
    user = args(pod(runtime, spec, extraArgs=["--revision", "main"]))
    assert user.count("--revision") == 1 and value(user, "--revision") == "main"
    bare = args(pod(runtime, {"source": "Qwen/Qwen3-8B", "format": "safetensors"}))
    assert "--revision" not in bare


def test_llamacpp_takes_hf_with_its_quant_tag_and_refuses_a_revision() -> None:
    argv = args(pod("llamacpp", {"source": "hf://unsloth/Qwen3-8B-GGUF:Q4_K_M"}))
    assert value(argv, "-hf") == "unsloth/Qwen3-8B-GGUF:Q4_K_M" and "--revision" not in argv
    service = parse_inference_service({"modelRef": "m", "runtime": "llamacpp"})
    errors = rule_errors(service, parse_model({"source": "hf://unsloth/Qwen3-8B-GGUF@v2"}))
    assert errors and errors[0].startswith("Model 'm' spec.source: 'hf://unsloth/Qwen3-8B-GGUF@v2'")
    assert "no revision" in errors[0]
    vllm = parse_inference_service({"modelRef": "m", "runtime": "vllm"})
    quant = parse_model({"source": "hf://a/b:Q4_K_M", "format": "gguf"})
    assert "the :Q4_K_M tag is llama.cpp's" in rule_errors(vllm, quant)[0]


def test_hf_file_source_is_downloaded_from_the_hub_at_its_revision() -> None:
    p = pod("llamacpp", {"source": "hf://org/repo-GGUF/sub/m-Q4.gguf@v1"})
    assert value(args(p), "--model") == "/models/m-Q4.gguf"
    env = {e["name"]: e.get("value") for e in p["initContainers"][0]["env"]}
    assert env["LOADER_COUNT"] == "1" and env["LOADER_FILE_0"] == "m-Q4.gguf"
    assert env["LOADER_URL_0"] == "https://huggingface.co/org/repo-GGUF/resolve/v1/sub/m-Q4.gguf"


# -- pvc:// and host paths: volumes, read-only, never hidden --------------------------


def test_pvc_source_mounts_the_claim_read_only_and_passes_the_path() -> None:
    p = pod("llamacpp", {"source": "pvc://model-store/qwen/m.gguf"})
    assert value(args(p), "--model") == "/model-source/qwen/m.gguf"
    assert p["volumes"] == [
        {
            "name": "model-source",
            "persistentVolumeClaim": {"claimName": "model-store", "readOnly": True},
        }
    ]
    assert p["containers"][0]["volumeMounts"] == [
        {"name": "model-source", "mountPath": "/model-source", "readOnly": True}
    ]
    assert "initContainers" not in p
    directory = pod("vllm", {"source": "pvc://model-store/Qwen3-8B", "format": "safetensors"})
    assert args(directory)[0] == "/model-source/Qwen3-8B"  # `vllm serve <model>`


@pytest.mark.parametrize(
    ("runtime", "source", "fmt", "kind"),
    [
        ("llamacpp", "/mnt/models/m.gguf", "gguf", "File"),
        ("llamacpp", "file:///mnt/models//q/./m.gguf", "gguf", "File"),
        ("vllm", "/mnt/models/Qwen3-8B", "safetensors", "Directory"),
        ("sglang", "file:///mnt/models/Qwen3-8B", "safetensors", "Directory"),
    ],
)
def test_host_path_under_an_allowed_root_is_a_read_only_host_path(
    runtime: str, source: str, fmt: str, kind: str
) -> None:
    p = pod(runtime, {"source": source, "format": fmt})
    path = "/" + "/".join(
        x for x in source.removeprefix("file://").split("/") if x not in ("", ".")
    )
    assert p["volumes"] == [{"name": "host-model", "hostPath": {"path": path, "type": kind}}]
    assert p["containers"][0]["volumeMounts"] == [
        {"name": "host-model", "mountPath": path, "readOnly": True}
    ]
    assert path in args(p)


@pytest.mark.parametrize("roots", [(), ("/mnt/other",), ("/mnt/model",)])
def test_no_host_path_volume_is_built_outside_the_allowed_roots(roots: tuple[str, ...]) -> None:
    with pytest.raises(SourceNotAllowed, match=r"spec.source: '/mnt/models/m.gguf'"):
        pod("llamacpp", {"source": "/mnt/models/m.gguf"}, roots=roots)


def test_a_source_under_models_is_not_hidden_by_the_loader_volume() -> None:
    p = pod("llamacpp", {"source": "/models/m.gguf"}, roots=("/models",))
    assert [v["name"] for v in p["volumes"]] == ["host-model"]
    assert p["containers"][0]["volumeMounts"] == [
        {"name": "host-model", "mountPath": "/models/m.gguf", "readOnly": True}
    ]
    hub = pod("vllm", {"source": "Qwen/Qwen3-8B", "format": "safetensors"})
    assert "volumeMounts" not in hub["containers"][0] or not hub["containers"][0]["volumeMounts"]


# -- s3:// : the loader signs with the Secret's keys, never copied ------------------


def test_s3_loader_reads_the_secret_through_secret_key_refs() -> None:
    spec = {"source": "s3://models/q/m,f.gguf", "sourceSecretRef": {"name": "creds"}}
    p = pod("llamacpp", spec)
    init = p["initContainers"][0]
    given = {e["name"]: e.get("value") for e in init["env"]}
    assert given["LOADER_URL_0"] == "models/q/m%2Cf.gguf" and given["LOADER_FILE_0"] == "m,f.gguf"
    assert given["LOADER_PATH"] == "/models/m,f.gguf" and given["LOADER_S3"] == "1"
    env = {
        e["name"]: e["valueFrom"]["secretKeyRef"]
        for e in init["env"]
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert env["AWS_ACCESS_KEY_ID"] == {"name": "creds", "key": "AWS_ACCESS_KEY_ID"}
    assert env["AWS_SECRET_ACCESS_KEY"] == {"name": "creds", "key": "AWS_SECRET_ACCESS_KEY"}
    for optional in ("AWS_REGION", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN"):
        assert env[optional] == {"name": "creds", "key": optional, "optional": True}
    assert value(args(p), "--model") == "/models/m,f.gguf"


def _sigv4_valid(handler: http.server.BaseHTTPRequestHandler, secret: str) -> bool:
    """Recompute the request's AWS SigV4 signature (service s3) from what arrived."""
    auth = handler.headers.get("Authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return False
    parts = dict(p.strip().split("=", 1) for p in auth.split(" ", 1)[1].split(","))
    _, date, region, service, _ = parts["Credential"].split("/")
    signed = parts["SignedHeaders"].split(";")
    headers = "".join(f"{h}:{handler.headers[h].strip()}\n" for h in signed)
    payload = handler.headers.get("x-amz-content-sha256") or hashlib.sha256(b"").hexdigest()
    path, _, query = handler.path.partition("?")
    canonical = "\n".join(["GET", path, query, headers, ";".join(signed), payload])
    amz_date = handler.headers["x-amz-date"]
    scope = f"{date}/{region}/{service}/aws4_request"
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{digest}"
    key = f"AWS4{secret}".encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return service == "s3" and hmac.compare_digest(expected, parts["Signature"])


@pytest.fixture
def s3_server() -> Iterator[tuple[str, list[Obj]]]:
    """An S3 stand-in: path-style GET /bucket/key, 403 unless SigV4 verifies."""
    seen: list[Obj] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = _sigv4_valid(self, "secret/key+1")
            seen.append(
                {"path": self.path, "ok": ok, "token": self.headers["x-amz-security-token"]}
            )
            body = b"gguf-bytes" if ok and self.path == "/models/q/m%2Cf.gguf" else b"denied"
            self.send_response(200 if body == b"gguf-bytes" else 403)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


def _run_s3_loader(tmp: Path, endpoint: str, secret: str) -> subprocess.CompletedProcess[str]:
    p = pod("llamacpp", {"source": "s3://models/q/m,f.gguf", "sourceSecretRef": {"name": "c"}})
    sh, flag, script = p["initContainers"][0]["command"]
    assert script == SCRIPT
    given = {e["name"]: e["value"] for e in p["initContainers"][0]["env"] if "value" in e}
    env = {
        **given,
        "LOADER_DIR": str(tmp),
        "LOADER_TERMINATION_LOG": str(tmp / "termination-log"),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": secret,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_SESSION_TOKEN": "token-1",
    }
    return subprocess.run(
        [sh, flag, script.replace("--retry 5", "--retry 0")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_s3_loader_signs_with_sigv4_against_an_s3_endpoint(
    tmp_path: Path, s3_server: tuple[str, list[Obj]]
) -> None:
    endpoint, seen = s3_server
    done = _run_s3_loader(tmp_path, endpoint, "secret/key+1")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "m,f.gguf").read_bytes() == b"gguf-bytes"
    assert seen[0] == {"path": "/models/q/m%2Cf.gguf", "ok": True, "token": "token-1"}


def test_s3_loader_fails_on_a_wrong_secret(
    tmp_path: Path, s3_server: tuple[str, list[Obj]]
) -> None:
    endpoint, seen = s3_server
    done = _run_s3_loader(tmp_path, endpoint, "wrong")
    assert done.returncode != 0
    assert not (tmp_path / "m,f.gguf").exists()
    assert seen and not any(s["ok"] for s in seen)


# -- admission and reconcile refuse alike ----------------------------------------------


_review = admission_request


def test_webhook_refuses_a_host_path_outside_the_roots() -> None:
    model = {"source": "/mnt/models/m.gguf"}
    allowed, message = verdict(_review("Model", model))
    assert not allowed and message.startswith("spec.source: '/mnt/models/m.gguf' is a host path")
    assert verdict(_review("Model", model), roots=ROOTS) == (True, "")
    assert not verdict(_review("Model", model), roots=("/srv",))[0]


def test_webhook_refuses_a_revision_llamacpp_cannot_take() -> None:
    model = {"metadata": {"name": "m"}, "spec": {"source": "hf://unsloth/Q-GGUF@v2"}}
    review = _review("InferenceService", {"modelRef": "m", "runtime": "llamacpp"})
    allowed, message = verdict(review, lambda ns, name: model)
    assert not allowed and "Model 'm' spec.source: 'hf://unsloth/Q-GGUF@v2'" in message
    vllm = _review("InferenceService", {"modelRef": "m", "runtime": "vllm"})
    assert verdict(vllm, lambda ns, name: model)[0]


@pytest.mark.parametrize(("spec", "field"), HOSTILE)
def test_webhook_and_reconcile_refuse_a_hostile_source_naming_the_field(
    spec: Obj, field: str
) -> None:
    allowed, message = verdict(_review("Model", spec))
    assert not allowed and message.startswith(f"{field}: "), message
    with pytest.raises(InvalidSpec) as e:
        parse_model(spec)
    assert e.value.errors[0].startswith(f"{field}: ")


def test_cli_takes_comma_separated_absolute_roots() -> None:
    assert parse(["--allowed-host-path-roots", "/mnt/models, /srv/m"]).allowed_host_path_roots == (
        "/mnt/models",
        "/srv/m",
    )
    assert parse([]).allowed_host_path_roots == ()
    with pytest.raises(SystemExit):
        parse(["--allowed-host-path-roots", "mnt/models"])
