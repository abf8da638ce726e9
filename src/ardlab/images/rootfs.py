"""The proof's clean OS: a Debian root made by debootstrap, cached as a tarball, and a fresh copy per library.

The definitions start from ``debian:bookworm-slim``, which Debian's own image tooling (debuerreotype) makes with
``debootstrap --variant=minbase``; the proof's base is that same command's output. The tarball is cached under
``$ARDLAB_CACHE/images`` (default ``~/.cache/ardlab``, where the Horovod wheels are cached too), named by suite,
variant and the day it was made; the newest one is used until ``refresh`` asks for a new one.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

VARIANT = "minbase"
# The base the definitions start from (containers/render-defs puts it in them), and what a definition may start
# from: the debootstrap suite that makes the same system.
BASE_IMAGE = "debian:bookworm-slim"
DOCKER_BASES = {BASE_IMAGE: "bookworm", "debian:12-slim": "bookworm"}


def container_fact(expression: str) -> str:
    """A fact the container scripts share (containers/common.sh: the build user, the Debian mirror), as bash prints
    `expression` after sourcing that file."""
    from ardlab.comm.launch import repo_root

    path = repo_root() / "containers" / "common.sh"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: the image proofs and builds run from a checkout of ardlab")
    return subprocess.run(["bash", "-c", f'. "$1"; {expression}', "common.sh", str(path)], capture_output=True,
                          text=True, check=True).stdout.strip()


def debian_mirror() -> str:
    """The Debian mirror apt uses on this machine (the one the container scripts use)."""
    return container_fact("debian_mirror")


@dataclass(frozen=True)
class Base:
    suite: str
    tarball: Path

    @property
    def made_on(self) -> str:
        return self.tarball.name.rsplit("-", 1)[-1].split(".")[0]


def cache_dir() -> Path:
    root = os.environ.get("ARDLAB_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ardlab"
    return Path(root) / "images"


def suite_of(bootstrap: str, base: str) -> str:
    """The Debian suite that makes the definition's base, or an error naming the base."""
    if bootstrap == "debootstrap":
        return base
    if bootstrap == "docker" and base in DOCKER_BASES:
        return DOCKER_BASES[base]
    raise ValueError(f"the proof makes its base with debootstrap, and 'Bootstrap: {bootstrap}' / 'From: {base}' has "
                     f"no debootstrap equivalent here; use one of {', '.join(sorted(DOCKER_BASES))} (Bootstrap: "
                     "docker) or Bootstrap: debootstrap")


def base(suite: str, refresh: bool = False, log=print) -> Base:
    """The newest cached tarball of `suite`, made now if there is none (or `refresh`)."""
    folder = cache_dir()
    found = sorted(folder.glob(f"debian-{suite}-{VARIANT}-*.tar"))
    if found and not refresh:
        return Base(suite, found[-1])
    folder.mkdir(parents=True, exist_ok=True)
    day = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d")
    out = folder / f"debian-{suite}-{VARIANT}-{day}.tar"
    with tempfile.TemporaryDirectory(dir=folder, prefix=".debootstrap-") as tmp:
        target = Path(tmp) / "root"
        log(f"ardlab: debootstrap --variant={VARIANT} {suite} (a few minutes, once; cached as {out})")
        proc = subprocess.run(["debootstrap", f"--variant={VARIANT}", suite, str(target), debian_mirror()],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"debootstrap {suite} failed (exit {proc.returncode}): "
                               f"{(proc.stdout + proc.stderr).strip()[-2000:]}")
        partial = out.with_suffix(".tar.tmp")
        subprocess.run(["tar", "--numeric-owner", "-C", str(target), "-cf", str(partial), "."], check=True)
        partial.replace(out)
    return Base(suite, out)


def fresh_root(b: Base, where: Path) -> Path:
    """A new root at `where` from the base tarball (an old one there is removed first, if nothing is mounted in it)."""
    where = where.resolve()
    busy = mounts_under(where)
    if busy:
        raise RuntimeError(f"{where} still has mounts ({', '.join(busy)}); unmount them before a new proof")
    if where.exists():
        shutil.rmtree(where)
    where.mkdir(parents=True)
    subprocess.run(["tar", "--numeric-owner", "-C", str(where), "-xpf", str(b.tarball)], check=True)
    return where


def mounts_under(path: Path) -> list[str]:
    """Mount points at or below `path` in this mount namespace (what a proof must never leave behind)."""
    path = str(Path(path).resolve())
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == path or point.startswith(path + "/"):
            out.append(point)
    return out


def size_bytes(root: Path) -> int:
    """Bytes the root holds on disk (du), the image's size before squashfs compression."""
    proc = subprocess.run(["du", "-sb", "--one-file-system", str(root)], capture_output=True, text=True, check=True)
    return int(proc.stdout.split()[0])
