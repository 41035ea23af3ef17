"""Model.spec.source: LLMKube's source schemes, parsed into what serving each one needs.

- http(s)://host/file (url): downloaded by the pod's loader init container.
- hf://org/repo[@rev] or a bare org/repo (hub): the runtime's repo id and revision flag.
- hf://org/repo/path/file[@rev] (hub-file): downloaded from huggingface.co/…/resolve/<rev>/….
- pvc://claim/path (pvc): the claim mounted read-only, the runtime given the path in it.
- file:///path or /path (host): a read-only hostPath volume, only under an operator root.
- s3://bucket/key (s3): downloaded by the loader, signed with sourceSecretRef's keys.

Every problem names `spec.source` (or `spec.sourceSecretRef`), so the webhook and the
reconcilers refuse the same specs with the same words.

A source, and each spec.files / spec.mmproj name, is one value handed on whole (to curl's
--url, to the runtime's argv, as a path under the loader's folder): it holds no
whitespace, no control character and no '..'; SOURCE_PATTERN and REPO_FILE_PATTERN say
so in the CRD (anchored at both ends), text_problem() in words.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import quote, urlparse

FIELD = "spec.source"
# huggingface_hub.utils.validate_repo_id: what vLLM, SGLang and TGI accept as a repo id.
REPO_ID = re.compile(r"^(\b[\w\-.]+\b/)?\b[\w\-.]{1,96}\b$", re.ASCII)
# A git ref: branch, tag or commit (branches may hold "/", e.g. refs/pr/1).
REVISION = re.compile(r"^[\w\-.]+(/[\w\-.]+)*$", re.ASCII)
# llama.cpp's -hf <user>/<model>[:quant] tag.
QUANT = re.compile(r"^[\w\-.]+$", re.ASCII)
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
S3_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")
HF_ENDPOINT = "https://huggingface.co"

# Printable ASCII but the space, never '..': one or more of (an optional '.', a non-dot).
_NON_DOT = r"[\x21-\x2d\x2f-\x7e]"
_NO_DOTDOT = rf"(\.?{_NON_DOT})+\.?"
# LLMKube's forms (a scheme URL, an absolute path, a bare org/repo), anchored at both ends.
SOURCE_PATTERN = (
    rf"^((https?|hf|pvc|s3|file)://{_NO_DOTDOT}|/{_NO_DOTDOT}|[a-zA-Z0-9](\.?[\w\-/])+\.?)$"
)
# A spec.files / spec.mmproj name: '/'-joined names that neither start nor end with '.'
# and hold no '..' (the loader's own files under the folder start with '.').
_NAME = r"[A-Za-z0-9_\-+=@,]+(\.[A-Za-z0-9_\-+=@,]+)*"
REPO_FILE_PATTERN = rf"^{_NAME}(/{_NAME})*$"
_CHAR_NAMES = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab", " ": "a space"}


def text_problem(value: str) -> str | None:
    """Why a value cannot be handed on as one value, or None: whitespace, a control (or
    other invisible) character, or '..'."""
    # Printable ASCII but the space holds none of them (the usual value: one C scan).
    plain = value.isascii() and value.isprintable() and " " not in value
    for at, ch in enumerate("" if plain else value):
        if ch.isspace() or unicodedata.category(ch).startswith("C"):
            name = _CHAR_NAMES.get(ch, f"U+{ord(ch):04X}")
            return f"holds {name} at offset {at}: whitespace and control characters are not allowed"
    if ".." in value:
        return "'..' is not allowed anywhere in it"
    return None


def explain_source(value: str) -> str:
    """Why a value misses SOURCE_PATTERN, in words."""
    bare = "://" not in value and not value.startswith("/")
    return (
        text_problem(value)
        or (bare and _bare_file_problem(value))
        or (
            "is not a model source: an http(s)://, hf://, pvc://, s3:// or file:// URL, an "
            "absolute path or an org/repo id, in printable ASCII (percent-encode the rest)"
        )
    )


def explain_file(value: str) -> str:
    """Why a value misses REPO_FILE_PATTERN, in words."""
    return text_problem(value) or (
        "is not a repo-relative file path: names of letters, digits, '-', '_', '.', '+', "
        "'=', '@' and ',' joined by '/', none starting or ending with '.' (no glob, no "
        "'..', not absolute)"
    )


@dataclass(frozen=True)
class ModelSource:
    kind: str  # url, hub, hub-file, pvc, host, s3
    raw: str
    repo: str = ""  # hub, hub-file: [org/]repo
    revision: str | None = None  # hub, hub-file
    quant: str | None = None  # hub: llama.cpp's :quant tag
    path: str = ""  # pvc: inside the claim; host: normalised absolute path; hub-file: in the repo
    claim: str = ""  # pvc
    bucket: str = ""  # s3
    key: str = ""  # s3
    url: str = ""  # url, hub-file: what the loader downloads

    @property
    def filename(self) -> str:
        """The file a loader writes (url, hub-file, s3)."""
        tail = {"s3": self.key, "hub-file": self.path}.get(self.kind) or urlparse(self.url).path
        return posixpath.basename(tail) or "model"


class SourceError(ValueError):
    pass


def _repo_problem(repo: str) -> str | None:
    """huggingface_hub's validate_repo_id, as the runtimes apply it to a non-path model."""
    if repo.count("/") > 1:
        return "a repo id is 'repo' or 'org/repo'"
    if not REPO_ID.match(repo):
        return (
            "a repo id uses letters, digits, '-', '_' and '.', does not start or end with "
            "'-' or '.', and has at most 96 characters per part"
        )
    if "--" in repo or ".." in repo:
        return "a repo id cannot hold '--' or '..'"
    if repo.endswith(".git"):
        return "a repo id cannot end with '.git'"
    return None


def _segments(path: str) -> list[str]:
    """The path's parts without empty and '.' ones; '..' is refused, never resolved: a
    lexical resolve would let /allowed/../etc look allowed, and kubelet refuses '..'."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise SourceError("'..' is not allowed in a path")
    return parts


def _hub(raw: str, rest: str, scheme: bool) -> ModelSource:
    rest, at, revision = rest.partition("@")
    if at and not REVISION.match(revision):
        raise SourceError(f"revision {revision!r} is not a branch, tag or commit")
    if at and ".." in revision:
        raise SourceError("'..' is not allowed in a revision")
    parts = rest.split("/")
    if scheme and len(parts) > 2:  # hf://org/repo/path/to/file: one file of the repo
        repo, path = "/".join(parts[:2]), "/".join(_segments("/".join(parts[2:])))
        problem = _repo_problem(repo)
        if problem:
            raise SourceError(problem)
        url = hub_file_url(HF_ENDPOINT, repo, revision, path)
        return ModelSource(
            "hub-file", raw, repo=repo, revision=revision or None, path=path, url=url
        )
    repo, colon, quant = rest.partition(":")
    if colon and not QUANT.match(quant):
        raise SourceError(f"quant tag {quant!r} is not a name (e.g. Q4_K_M)")
    problem = _repo_problem(repo)
    if problem:
        raise SourceError(problem)
    return ModelSource("hub", raw, repo=repo, revision=revision or None, quant=quant or None)


def hub_file_url(hub: str, repo: str, revision: str | None, path: str) -> str:
    """Where the hub at `hub` serves one file of a repo (its resolve endpoint)."""
    return f"{hub}/{repo}/resolve/{quote(revision or 'main', safe='')}/{quote(path)}"


def _pvc(raw: str, rest: str) -> ModelSource:
    claim, _, path = rest.partition("/")
    if not (DNS1123_SUBDOMAIN.match(claim) and len(claim) <= 253):
        raise SourceError(
            f"claim name {claim!r} is not a PersistentVolumeClaim name (DNS-1123 subdomain)"
        )
    parts = _segments(path)
    if not parts:
        raise SourceError("give the model's path inside the claim: pvc://claim/path/to/model")
    return ModelSource("pvc", raw, claim=claim, path="/".join(parts))


def _host(raw: str, path: str) -> ModelSource:
    if not path.startswith("/"):
        raise SourceError("a file:// source is an absolute path: file:///path/to/model")
    parts = _segments(path)
    if not parts:
        raise SourceError("the root directory is not a model")
    return ModelSource("host", raw, path="/" + "/".join(parts))


def _s3(raw: str, rest: str) -> ModelSource:
    bucket, _, key = rest.partition("/")
    if not S3_BUCKET.match(bucket):
        raise SourceError(f"bucket {bucket!r} is not an S3 bucket name")
    if not key or key.endswith("/"):
        raise SourceError("give one object: s3://bucket/path/to/model.gguf (not a prefix)")
    return ModelSource("s3", raw, bucket=bucket, key=key)


@lru_cache(maxsize=1024)
def parse_source(raw: str) -> ModelSource:
    """The source's kind and parts; raises SourceError (the message, without the field)."""
    source = _parse(raw)
    if source.kind in ("url", "hub-file", "s3") and source.filename.startswith("."):
        raise SourceError(
            f"the file it names, {source.filename!r}, starts with '.' (the loader keeps its "
            "own files under those names)"
        )
    return source


def _parse(raw: str) -> ModelSource:
    scheme, sep, rest = raw.partition("://")
    scheme = scheme.lower() if sep else ""
    if scheme in ("http", "https"):
        return ModelSource("url", raw, url=raw)
    if scheme == "hf":
        return _hub(raw, rest, scheme=True)
    if scheme == "pvc":
        return _pvc(raw, rest)
    if scheme == "file":
        return _host(raw, rest)
    if scheme == "s3":
        return _s3(raw, rest)
    if sep:
        raise SourceError(f"scheme {scheme!r} is not one of http, https, hf, pvc, file, s3")
    if raw.startswith("/"):
        return _host(raw, raw)
    problem = _bare_file_problem(raw)
    if problem:
        raise SourceError(problem)
    return _hub(raw, raw, scheme=False)


# Model files' extensions: a bare value ending in one names a file, not a hub repository.
MODEL_FILE_EXTENSIONS = (".gguf", ".ggml", ".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".onnx")


def _bare_file_problem(raw: str) -> str | None:
    """Why a bare value (no scheme, not absolute) names a file rather than a repo id, or
    None. The runtimes would send such a value to the hub as a repository's name
    (llama.cpp's -hf, vLLM's and SGLang's model argument) and serve nothing."""
    repo = raw.partition("@")[0].partition(":")[0]
    if raw.startswith(("./", "../")):
        why = "is a relative path"
    elif len([p for p in repo.split("/") if p]) > 2:
        why = "has more than two segments"
    elif repo.lower().endswith(MODEL_FILE_EXTENSIONS):
        why = f"ends in a model file's extension ({posixpath.splitext(repo)[1]})"
    else:
        return None
    return (
        f"a bare source is a hub repo id (owner/repo), and this one {why}: it names a file. "
        "For a file of a hub repo write hf://owner/repo/path/file.gguf; for a file on a "
        "volume write file:///abs/path/file.gguf (a host path) or pvc://claim/path/file.gguf"
    )


def source_errors(raw: str) -> list[str]:
    problem = text_problem(raw)
    if problem:
        return [f"{FIELD}: {raw!r}: {problem}"]
    try:
        parse_source(raw)
    except SourceError as e:
        return [f"{FIELD}: {raw!r}: {e}"]
    return []


def normalised_roots(roots: tuple[str, ...]) -> tuple[str, ...]:
    """The usable roots: absolute ones, normalised; LLMKube ignores empty and relative ones."""
    out = []
    for root in roots:
        if root.startswith("/") and ".." not in root.split("/"):
            out.append("/" + "/".join(p for p in root.split("/") if p not in ("", ".")))
    return tuple(out)


def host_path_error(source: ModelSource, roots: tuple[str, ...]) -> str | None:
    """Why a host-path source may not be mounted, or None (not a host path, or allowed).

    Lexical like LLMKube's check (symlinks inside a root are trusted); an empty list
    disables host paths, the secure default (GHSA-jw3m-8q7m-f35r).
    """
    if source.kind != "host":
        return None
    usable = normalised_roots(roots)
    if not usable:
        return (
            f"{FIELD}: {source.raw!r} is a host path, and host-path sources are disabled: "
            "the operator allows no root (--allowed-host-path-roots, chart "
            "modelSource.allowedHostPathRoots)"
        )
    for root in usable:
        if root == "/" or source.path == root or source.path.startswith(root + "/"):
            return None
    return (
        f"{FIELD}: {source.raw!r} is not under an allowed host-path root "
        f"({', '.join(usable)}; --allowed-host-path-roots)"
    )


# Formats whose model is a directory: a single downloaded file cannot be one.
DIRECTORY_FORMATS = ("safetensors", "pytorch")


def runtime_source_errors(runtime: str, source: ModelSource, fmt: str, model_ref: str) -> list[str]:
    """What this runtime cannot load from this source (webhook and reconcile alike)."""
    where = f"Model {model_ref!r} {FIELD}: {source.raw!r}"
    errors = []
    if source.kind == "hub" and runtime == "llamacpp":
        if source.revision:
            errors.append(
                f"{where} pins revision {source.revision!r}, but llama.cpp's -hf takes "
                "<user>/<model>[:quant] and no revision: drop @"
                f"{source.revision} or serve it with vllm, sglang or tgi"
            )
        if "/" not in source.repo:
            errors.append(f"{where}: llama.cpp's -hf needs <user>/<model>, not {source.repo!r}")
    if source.kind == "hub" and source.quant and runtime != "llamacpp":
        errors.append(
            f"{where}: the :{source.quant} tag is llama.cpp's (-hf <user>/<model>[:quant]); "
            f"{runtime} takes a repo id and --revision"
        )
    if (
        source.kind in ("pvc", "host")
        and runtime == "llamacpp"
        and not source.path.endswith(".gguf")
    ):
        errors.append(f"{where}: llama.cpp loads one .gguf file, not {source.path!r}")
    if source.kind in ("url", "hub-file", "s3") and fmt in DIRECTORY_FORMATS:
        errors.append(
            f"{where} is one file, and spec.format {fmt} is a model directory: use "
            "hf://org/repo, a repo id, pvc://claim/dir or a host directory"
        )
    return errors


# The hub's own hosts: a Model's HF token may be sent there (the loader; FieldsServed).
HF_HOSTS = ("huggingface.co", "www.huggingface.co")
