"""`python -m devcluster`: the control plane started by hand (Ctrl-C stops everything).

python -m devcluster [--nodes 2] [--gpus 4] [--sharing]
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from .cluster import DEFAULT_GPUS, DEFAULT_NODES, ClusterError, start_cluster


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m devcluster")
    p.add_argument("--nodes", type=int, default=DEFAULT_NODES)
    p.add_argument("--gpus", type=int, default=DEFAULT_GPUS, help="GPUs per node")
    p.add_argument(
        "--sharing", action="store_true", help="shareable and partitionable GPUs (and gates)"
    )
    args = p.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="llmkube-kube-"))
    started = time.monotonic()
    try:
        cluster = start_cluster(workdir, nodes=args.nodes, gpus=args.gpus, sharing=args.sharing)
    except ClusterError as e:  # not built, or a component that did not come up: say which
        shutil.rmtree(workdir, ignore_errors=True)
        print(f"python -m devcluster: {e}", file=sys.stderr)
        return 2
    print(f"ready in {time.monotonic() - started:.1f} s: {cluster.url}")
    print(f"export KUBECONFIG={cluster.admin_kubeconfig}")

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
