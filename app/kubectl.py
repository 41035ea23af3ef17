"""`kubectl llmkube`: status, deploy and list for LLMKube's resources.

Installed as the `kubectl-llmkube` console script, so kubectl finds it on PATH as the
`llmkube` plugin. It reads the same kubeconfig as kubectl ($KUBECONFIG or --kubeconfig;
the context's namespace unless -n is given).

    kubectl llmkube list [-A]
    kubectl llmkube status NAME
    kubectl llmkube deploy NAME --source Qwen/Qwen3-8B --runtime vllm --gpus 1 \\
        --claim-template one-gpu
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

from controller.errors import ApiError
from controller.kube import KubeClient
from controller.resources import (
    GPU_QUOTA,
    INFERENCE_SERVICE,
    MODEL,
    POD,
    RESOURCE_CLAIM,
    VERSION,
)
from objtypes import Obj

from .manifests import apply

API_VERSION = f"{INFERENCE_SERVICE.group}/{VERSION}"
RUNTIMES = ("llamacpp", "vllm", "tgi", "sglang", "generic", "personaplex", "llamacpp-router")
FORMATS = ("gguf", "mlx", "safetensors", "pytorch", "custom")
ACCELERATORS = ("cpu", "metal", "cuda", "rocm", "intel", "vulkan")
SERVICE_LABEL = "inference.llmkube.dev/inferenceservice"


def context_namespace(kubeconfig: str | None) -> str:
    """The current context's namespace, as kubectl would use it; "default" without one."""
    paths = (kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config").split(os.pathsep)
    for path in paths:
        file = Path(path).expanduser()
        if not file.is_file():
            continue
        config = yaml.safe_load(file.read_text()) or {}
        current = config.get("current-context")
        for ctx in config.get("contexts") or []:
            if ctx.get("name") == current:
                return str((ctx.get("context") or {}).get("namespace") or "default")
    return "default"


def _table(rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    return "\n".join(
        "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )


def _status(obj: Obj | None) -> Obj:
    return dict((obj or {}).get("status") or {})


# -- status ----------------------------------------------------------------------------


def _claim_rows(model: Obj | None, pods: list[Obj], claims: dict[str, Obj]) -> list[list[str]]:
    rows: list[list[str]] = []
    gpu = (((model or {}).get("spec") or {}).get("hardware") or {}).get("gpu") or {}
    for ref in gpu.get("resourceClaims") or []:
        source = ref.get("resourceClaimTemplateName") or ref.get("resourceClaimName") or "?"
        kind = "template" if ref.get("resourceClaimTemplateName") else "claim"
        made = [
            s["resourceClaimName"]
            for pod in pods
            for s in _status(pod).get("resourceClaimStatuses") or []
            if s.get("name") == ref.get("name") and s.get("resourceClaimName")
        ]
        if kind == "claim":
            made = [source]
        for name in made or ["-"]:
            claim = claims.get(name)
            results = ((_status(claim).get("allocation") or {}).get("devices") or {}).get(
                "results"
            ) or []
            devices = ", ".join(f"{r.get('pool', '?')}/{r.get('device', '?')}" for r in results)
            rows.append(
                [ref.get("name", "?"), f"{kind} {source}", name, devices or "not allocated"]
            )
    return rows


def _device_rows(allocation: object) -> list[list[str]]:
    """Per pod, each allocated device as status.allocation has it: driver/pool/device
    joined by the controller with what the device's ResourceSlice publishes."""
    if not isinstance(allocation, dict):
        return []
    rows = []
    for pod in allocation.get("pods") or []:
        for d in pod.get("devices") or []:
            where = f"{d.get('driver', '?')}/{d.get('pool', '?')}/{d.get('device', '?')}"
            rows.append(
                [pod.get("name", "?"), where, d.get("productName", "-"), d.get("memory", "-")]
            )
    return rows


def _quota_row(quotas: list[Obj], namespace: str, name: str) -> list[list[str]]:
    """The quotas (from any namespace: namespaceRef reaches across) with a row for it."""
    rows: list[list[str]] = []
    for quota in quotas:
        st = _status(quota)
        spec = quota.get("spec") or {}
        limit = spec.get("gpuCount", "-")
        used = st.get("usedGPUCount", st.get("used", "-"))
        scope = spec.get("namespaceRef") or quota["metadata"].get("namespace")
        mine = next(
            (
                s
                for s in st.get("services") or []
                if s.get("name") == name and s.get("namespace", scope) == namespace
            ),
            None,
        )
        if mine is None:
            continue
        rows.append(
            [
                quota["metadata"]["name"],
                f"{used}/{limit}",
                str(mine.get("gpus", "-")),
                f"{mine.get('admittedReplicas', '-')}/{mine.get('requestedReplicas', '-')}",
            ]
        )
    return rows


async def render_status(client: KubeClient, namespace: str, name: str) -> str | None:
    """What `kubectl llmkube status NAME` prints; None when the service does not exist."""
    isvc = await client.get(INFERENCE_SERVICE, namespace, name)
    if isvc is None:
        return None
    spec, st = isvc.get("spec") or {}, _status(isvc)
    model_name = str(spec.get("modelRef") or "")
    model = await client.get(MODEL, namespace, model_name) if model_name else None
    pods, _ = await client.list(POD, namespace, label_selector=f"{SERVICE_LABEL}={name}")
    claim_list, _ = await client.list(RESOURCE_CLAIM, namespace)
    claims = {c["metadata"]["name"]: c for c in claim_list}
    try:  # a GPUQuota in another namespace may cover it through namespaceRef
        quotas, _ = await client.list(GPU_QUOTA)
    except ApiError as e:
        if e.status != 403:
            raise
        quotas, _ = await client.list(GPU_QUOTA, namespace)  # allowed here only
    ready = f"{st.get('readyReplicas', 0)}/{spec.get('replicas', 1)}"
    lines = [
        f"InferenceService {namespace}/{name}",
        f"  Phase:     {st.get('phase', 'Unknown')}",
        f"  Model:     {model_name} ({'found' if model else 'not found'})",
        f"  Runtime:   {spec.get('runtime', '-')}",
        f"  Replicas:  {ready} ready, {st.get('admittedReplicas', '-')} admitted",
        f"  Endpoint:  {st.get('endpoint') or '-'}",
    ]
    alloc = st.get("allocation")
    if isinstance(alloc, dict):
        lines.append(
            f"  Devices:   {alloc.get('summary', '-')} allocated by DRA "
            f"({alloc.get('allocatedPods', 0)} pod(s) with all claims allocated)"
        )
    kueue = st.get("kueue")
    if isinstance(kueue, dict):
        verdict = "admissible" if kueue.get("admissible") else "never admitted, see KueueCompatible"
        lines.append(
            f"  Kueue:     queue {kueue.get('queueName')}, charge "
            f"{kueue.get('summary') or 'none'} ({verdict})"
        )
    lines += ["", "Conditions:"]
    conds = st.get("conditions") or []
    conds += [
        {**c, "type": f"Model/{c.get('type')}"} for c in _status(model).get("conditions") or []
    ]
    if conds:
        header = ["  TYPE", "STATUS", "REASON", "MESSAGE"]
        rows = [
            [f"  {c.get('type')}", c.get("status"), c.get("reason"), c.get("message", "")]
            for c in conds
        ]
        lines.append(_table([header, *rows]))
    else:
        lines.append("  none yet")
    claim_rows = _claim_rows(model, pods, claims)
    lines += ["", "Claims:"]
    if claim_rows:
        header = ["  NAME", "FROM", "RESOURCECLAIM", "ALLOCATED DEVICES"]
        lines.append(_table([header, *([f"  {r[0]}", *r[1:]] for r in claim_rows)]))
    else:
        lines.append("  none (device-plugin GPUs or CPU)")
    device_rows = _device_rows(st.get("allocation"))
    if device_rows:
        lines += ["", "Devices:"]
        header = ["  POD", "DEVICE", "PRODUCT", "MEMORY"]
        lines.append(_table([header, *([f"  {r[0]}", *r[1:]] for r in device_rows)]))
    quota_rows = _quota_row(quotas, namespace, name)
    lines += ["", "Quota:"]
    if quota_rows:
        header = ["  GPUQUOTA", "USED/LIMIT", "THIS SERVICE'S GPUS", "ADMITTED/REQUESTED"]
        lines.append(_table([header, *([f"  {r[0]}", *r[1:]] for r in quota_rows)]))
    else:
        lines.append("  no GPUQuota accounts for it")
    return "\n".join(lines)


# -- deploy ----------------------------------------------------------------------------


def model_format(args: argparse.Namespace) -> str:
    """--format, else what the source and runtime imply: llama.cpp loads GGUF only, and
    vLLM/SGLang/TGI are given a hub repo's safetensors unless the source is a .gguf file."""
    if args.format:
        return str(args.format)
    if args.runtime == "llamacpp" or str(args.source).lower().endswith(".gguf"):
        return "gguf"
    return "safetensors"


def build_manifests(args: argparse.Namespace) -> list[Obj]:
    """The Model and InferenceService `deploy` writes, both named NAME."""
    gpus = args.gpus or args.claim_template
    hardware: Obj = {"accelerator": args.accelerator or ("cuda" if gpus else "cpu")}
    if gpus:
        # With a claim template and no --gpus, count stays out: the controller sizes
        # the runtime from the devices the template asks for.
        gpu: Obj = {"enabled": True}
        if args.gpus:
            gpu["count"] = args.gpus
        if args.claim_template:
            gpu["resourceClaims"] = [
                {"name": "gpu", "resourceClaimTemplateName": args.claim_template}
            ]
        hardware["gpu"] = gpu
    meta = {"name": args.name, "namespace": args.namespace}
    model: Obj = {
        "apiVersion": API_VERSION,
        "kind": MODEL.kind,
        "metadata": meta,
        "spec": {"source": args.source, "format": model_format(args), "hardware": hardware},
    }
    service: Obj = {
        "apiVersion": API_VERSION,
        "kind": INFERENCE_SERVICE.kind,
        "metadata": dict(meta),
        "spec": {"modelRef": args.name, "runtime": args.runtime, "replicas": args.replicas},
    }
    return [model, service]


# -- list ------------------------------------------------------------------------------


async def render_list(client: KubeClient, namespace: str | None) -> str:
    services, _ = await client.list(INFERENCE_SERVICE, namespace)
    if not services:
        where = f"in namespace {namespace}" if namespace else "in any namespace"
        return f"No InferenceServices found {where}."
    header = ["NAMESPACE", "NAME", "MODEL", "RUNTIME", "PHASE", "READY", "GPUS", "ENDPOINT"]
    rows = []
    for isvc in sorted(services, key=lambda o: (o["metadata"]["namespace"], o["metadata"]["name"])):
        spec, st = isvc.get("spec") or {}, _status(isvc)
        rows.append(
            [
                isvc["metadata"]["namespace"],
                isvc["metadata"]["name"],
                spec.get("modelRef", "-"),
                spec.get("runtime", "-"),
                st.get("phase", "Unknown"),
                f"{st.get('readyReplicas', 0)}/{spec.get('replicas', 1)}",
                st.get("gpusPerReplica", "-"),
                st.get("endpoint") or "-",
            ]
        )
    return _table([header, *rows])


# -- command line ----------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--kubeconfig", help="kubeconfig file (default $KUBECONFIG)")
    common.add_argument("--server", help="API server URL, instead of the kubeconfig's")
    common.add_argument("-n", "--namespace", help="namespace (default: the context's)")
    p = argparse.ArgumentParser(
        prog="kubectl llmkube",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="{status,deploy,list}")
    status = sub.add_parser(
        "status",
        parents=[common],
        help="an InferenceService's conditions, endpoint, claims and quota",
    )
    status.add_argument("name", help="the InferenceService")
    deploy = sub.add_parser(
        "deploy", parents=[common], help="create or update a Model and an InferenceService"
    )
    deploy.add_argument("name", help="name of both the Model and the InferenceService")
    deploy.add_argument("--source", required=True, help="model source: org/repo, hf://, URL...")
    deploy.add_argument(
        "--runtime", choices=RUNTIMES, default="llamacpp", help="(default llamacpp)"
    )
    deploy.add_argument(
        "--format",
        choices=FORMATS,
        help="(default gguf for a .gguf source or the llamacpp runtime, else safetensors)",
    )
    deploy.add_argument(
        "--accelerator",
        choices=ACCELERATORS,
        help="(default cuda with --gpus or --claim-template, else cpu)",
    )
    deploy.add_argument(
        "--gpus", type=int, default=0, choices=range(0, 9), metavar="N", help="GPUs per replica"
    )
    deploy.add_argument(
        "--claim-template",
        help="attach the GPUs through DRA: a ResourceClaimTemplate in the namespace "
        "(without --gpus the runtime is sized from the devices it asks for)",
    )
    deploy.add_argument("--replicas", type=int, default=1, help="(default 1)")
    deploy.add_argument(
        "--dry-run", action="store_true", help="print the manifests instead of writing them"
    )
    listing = sub.add_parser("list", parents=[common], help="the InferenceServices")
    listing.add_argument(
        "-A", "--all-namespaces", action="store_true", help="list across all namespaces"
    )
    return p


async def run(args: argparse.Namespace) -> int:
    if args.command == "deploy" and args.dry_run:
        print(yaml.safe_dump_all(build_manifests(args), sort_keys=False), end="")
        return 0
    client = await KubeClient.connect(args.server, args.kubeconfig)
    try:
        if args.command == "status":
            text = await render_status(client, args.namespace, args.name)
            if text is None:
                print(
                    f'Error: InferenceService "{args.name}" not found in namespace '
                    f'"{args.namespace}"',
                    file=sys.stderr,
                )
                return 1
            print(text)
        elif args.command == "deploy":
            for obj in build_manifests(args):
                await apply(client, obj, args.namespace)
                print(f"{obj['kind'].lower()}/{args.name} applied")
        else:
            print(await render_list(client, None if args.all_namespaces else args.namespace))
        return 0
    except ApiError as e:
        print(f"Error from server: {e}", file=sys.stderr)
        return 1
    finally:
        await client.close()


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    args.namespace = args.namespace or context_namespace(args.kubeconfig)
    sys.exit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
