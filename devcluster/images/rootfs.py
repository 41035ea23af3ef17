"""Root filesystems for the node's images, from what this machine has: busybox-static's
applets, host binaries with the shared libraries they link (ldd), and a Debian rootfs
with Python made by debootstrap from the machine's own apt mirror."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

BUSYBOX = Path("/bin/busybox")
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
_LDD_PATH = re.compile(r"(?:=>\s*)?(/\S+)\s+\(0x[0-9a-f]+\)")


class ImageBuildError(RuntimeError):
    pass


def run(argv: list[str], *, timeout: float = 900, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-2000:]
        raise ImageBuildError(f"{' '.join(argv[:3])} ... exited {done.returncode}: {tail}")
    return done.stdout


def skeleton(root: Path, passwd: list[str], group: list[str]) -> None:
    """The folders and account files every image here has."""
    for d in ("bin", "etc", "tmp", "dev", "proc", "sys", "usr/bin", "var/tmp"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "tmp").chmod(0o1777)
    (root / "var/tmp").chmod(0o1777)
    (root / "etc/passwd").write_text("\n".join(["root:x:0:0:root:/root:/bin/sh", *passwd]) + "\n")
    (root / "etc/group").write_text("\n".join(["root:x:0:", *group]) + "\n")
    (root / "etc/nsswitch.conf").write_text("hosts: files dns\npasswd: files\ngroup: files\n")


def busybox(root: Path) -> None:
    """busybox-static and a link per applet at the path busybox gives it."""
    if not BUSYBOX.is_file():
        raise ImageBuildError(f"{BUSYBOX} missing (Debian's busybox-static)")
    shutil.copy2(BUSYBOX, root / "bin/busybox")
    for applet in run([str(BUSYBOX), "--list-full"]).split():
        link = root / applet
        if link.exists() or link.is_symlink() or applet.endswith("/busybox"):
            continue
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(root / "bin/busybox", link.parent))


def shared_libraries(binary: Path) -> list[Path]:
    """The libraries `binary` loads (ldd), the dynamic loader included."""
    out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True)
    if "not a dynamic executable" in (out.stdout + out.stderr):
        return []
    if out.returncode != 0:
        raise ImageBuildError(f"ldd {binary}: {out.stderr.strip()}")
    if "not found" in out.stdout:
        raise ImageBuildError(f"ldd {binary}: a library is missing:\n{out.stdout}")
    return [Path(m.group(1)) for m in _LDD_PATH.finditer(out.stdout)]


def install_binary(root: Path, binary: Path, at: str) -> None:
    """Copy `binary` to `at` inside root, with each library at the path ldd found it (so
    the loader finds them without a cache); libraries next to the binary go with it."""
    target = root / at.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(binary, target)
    for lib in shared_libraries(binary):
        dest = root / str(lib).lstrip("/")
        if dest.exists():
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(lib.resolve(), dest)


def apt_mirror() -> tuple[str, str]:
    """The machine's own Debian mirror and suite (debootstrap uses nothing else)."""
    suite = ""
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            suite = line.split("=", 1)[1].strip('"')
    mirror = ""
    sources = sorted(Path("/etc/apt/sources.list.d").glob("*.sources"))
    for f in sources:
        for line in f.read_text().splitlines():
            if line.startswith("URIs:") and not mirror and "security" not in line:
                mirror = line.split(":", 1)[1].split()[0]
    legacy = Path("/etc/apt/sources.list")
    if not mirror and legacy.is_file():
        for line in legacy.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb" and "security" not in parts[1]:
                mirror = parts[1]
                break
    if not (suite and mirror):
        raise ImageBuildError("no Debian suite or mirror found in /etc/os-release, /etc/apt")
    return mirror, suite


def debian_python(dest: Path) -> Path:
    """A Debian minbase rootfs with Python 3, venv, pip and the CA certificates, made
    once by debootstrap (about 90 s) and kept at dest."""
    done = dest / ".debootstrap-done"
    if done.exists():
        return dest
    if shutil.which("debootstrap") is None:
        raise ImageBuildError("debootstrap missing (Debian's debootstrap)")
    mirror, suite = apt_mirror()
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    packages = "python3-minimal,python3-venv,python3-pip,ca-certificates"
    run(
        ["debootstrap", "--variant=minbase", f"--include={packages}", suite, str(tmp), mirror],
        timeout=1200,
    )
    shutil.rmtree(tmp / "var/cache/apt/archives", ignore_errors=True)
    (tmp / "var/cache/apt/archives/partial").mkdir(parents=True, exist_ok=True)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    done.touch()
    return dest


def copy_tree(src: Path, dest: Path) -> None:
    """A copy keeping links, modes and hard links (cp -a)."""
    shutil.rmtree(dest, ignore_errors=True)
    run(["cp", "-a", str(src), str(dest)])
