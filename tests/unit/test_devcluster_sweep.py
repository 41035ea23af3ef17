"""devcluster.node.sweep_stale: what a killed node-tier run left is removed at the next
start, and a live run's folder is not touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from devcluster.node import OWNER_FILE, sweep_stale


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_dead_owners_folder_and_processes_go_a_live_ones_stay(tmp_path: Path) -> None:
    stale, live = tmp_path / "lkn-stale", tmp_path / "lkn-live"
    for folder, pid in ((stale, _dead_pid()), (live, os.getpid())):
        folder.mkdir()
        netns = f"llmkube-sweep-test-{folder.name}"
        (folder / OWNER_FILE).write_text(json.dumps({"pid": pid, "netns": netns}))
    # A process the killed run left behind: it names the folder in its argv.
    left = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)", str(stale / "kubelet.conf")]
    )
    kept = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)", str(live / "kubelet.conf")]
    )
    try:
        assert sweep_stale(tmp_path) == [stale]
        deadline = time.monotonic() + 10
        while left.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert left.poll() is not None, "the stale run's process was not stopped"
        assert not stale.exists()
        assert kept.poll() is None and (live / OWNER_FILE).is_file()
        assert sweep_stale(tmp_path) == []
    finally:
        for proc in (left, kept):
            proc.kill()
            proc.wait()
