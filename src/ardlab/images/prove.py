"""Prove a definition: its %files, %post, %environment and %test, run in a fresh Debian root as Apptainer would run
them, isolated from the host by ``unshare --mount --pid --fork`` + ``chroot``; or, where ``apptainer`` exists, the
real ``apptainer build`` and ``apptainer test`` (one entry point, ``prove``, chooses).

Isolation: the sections run in a mount namespace of their own (private propagation: nothing they mount reaches the
host) and a PID namespace of their own (when its first process ends, the kernel ends every process in it; unshare's
--kill-child ends that first process if the proof itself is killed). The root gets what an Apptainer build gives
a %post: the host's /dev (its own /dev/shm, a fresh tmpfs), /proc of its PID namespace, /sys, and the host's
/etc/resolv.conf and /etc/hosts; it shares the host's network, as Apptainer's build does. Site settings a build
host needs to reach its registries (proxies, pip's index, a TLS-intercepting proxy's CA bundle) are passed through
(``SITE_SETTINGS``), as a site passes them to ``apptainer build``.

Not re-implemented here: Apptainer itself (SIF, squashfs, signing, fakeroot, its own bind and user-namespace rules).
``exec_argv`` runs a command inside a proven root the way ``apptainer exec`` does (the host's environment, the
image's %environment, the host's /tmp, cwd and /dev bound in), so that srun can start ranks in it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from ardlab.comm.launch import repo_root
from ardlab.images import definition, rootfs

ROOT = repo_root()
CONTAINERS = ROOT / "containers"
ENV_FILE = "/.singularity.d/env/90-environment.sh"  # where Apptainer puts %environment
RUNSCRIPT = "/.singularity.d/runscript"
SITE_SETTINGS = ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
                 "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_DEFAULT_TIMEOUT")
CA_SETTINGS = ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
CA_IN_ROOT = "/run/ardlab-site-ca.crt"
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOST_ONLY = ("PYTHONPATH", "PYTHONHOME", "LD_LIBRARY_PATH", "LD_PRELOAD", "VIRTUAL_ENV")

# Runs on the host side inside the new namespaces (as their PID 1's child shell), then becomes the chroot.
_ENTER = r"""
set -eu
root=$1; shm=$2; shift 2
mount --make-rprivate /
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
# A build gets a /dev/shm of its own (nothing it leaves there reaches the host); ranks share the node's, as
# `apptainer exec` binds the host's /dev, so that ranks on one node see each other's shared memory.
[ "$shm" = host ] || mount -t tmpfs -o mode=1777,nosuid,nodev shm "$root/dev/shm"
mount --rbind /sys "$root/sys"
for f in /etc/resolv.conf /etc/hosts; do
  [ -e "$root$f" ] || : > "$root$f"
  mount --bind "$f" "$root$f"
done
while [ "$1" != -- ]; do
  src=${1%%:*}; dst=${1#*:}; shift
  if [ -d "$src" ]; then mkdir -p "$root$dst"
  else mkdir -p "$(dirname "$root$dst")"; [ -e "$root$dst" ] || : > "$root$dst"; fi
  mount --rbind "$src" "$root$dst"
done
shift
exec chroot "$root" "$@"
"""


class SectionFailed(RuntimeError):
    """A section's script failed: the message names the definition, the section and its line."""


@dataclass
class Proof:
    library: str
    method: str  # "chroot" (this harness) or "apptainer"
    root: Path | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    root_bytes: int | None = None
    base: str = ""

    def row(self) -> dict:
        return {"library": self.library, "method": self.method, "base": self.base,
                **{f"{k}_s": round(v, 1) for k, v in self.seconds.items()},
                "root_mib": None if self.root_bytes is None else round(self.root_bytes / 2**20)}


def check_can_prove(libraries: list[str]) -> None:
    """Every reason the proof cannot run, before anything is made: unknown library, not root, missing tools."""
    from ardlab.comm.libraries import library

    for lib in libraries:
        library(lib)  # an unknown one: ValueError naming it and the valid ones
    missing = [lib for lib in libraries if not (CONTAINERS / f"{lib}.def").is_file()]
    if missing:
        raise FileNotFoundError(f"no definition containers/<library>.def for {', '.join(missing)}; "
                                "containers/render-defs writes them")
    if shutil.which("apptainer"):
        return
    if os.geteuid() != 0:
        raise PermissionError("proving a definition without Apptainer needs root (debootstrap, namespaces, chroot); "
                              "run it as root")
    for tool, package in (("debootstrap", "debootstrap"), ("unshare", "util-linux"), ("chroot", "coreutils")):
        if not shutil.which(tool):
            raise FileNotFoundError(f"{tool} is missing: install Debian's {package} (apt-get install {package})")


def prove(library: str, work: Path, refresh_base: bool = False, log=print) -> Proof:
    """Build and test containers/<library>.def: with Apptainer where it exists, else in a fresh Debian root."""
    check_can_prove([library])
    path = CONTAINERS / f"{library}.def"
    if shutil.which("apptainer"):
        return _prove_with_apptainer(library, path, work, log)
    d = definition.read(path)
    suite = rootfs.suite_of(d.bootstrap, d.base)
    proof = Proof(library, "chroot")
    t = time.perf_counter()
    b = rootfs.base(suite, refresh=refresh_base, log=log)
    proof.base = f"debootstrap --variant={rootfs.VARIANT} {suite} ({b.made_on})"
    root = rootfs.fresh_root(b, work / library / "root")
    proof.root = root
    proof.seconds["base"] = time.perf_counter() - t
    t = time.perf_counter()
    copy_files(d, root)
    proof.seconds["files"] = time.perf_counter() - t
    t = time.perf_counter()
    log(f"ardlab: {library}: %post ({d.section('post').shell}) in {root}")
    run_section(d, "post", root, env=build_env(), binds=site_binds(), log_path=work / library / "post.log")
    proof.seconds["post"] = time.perf_counter() - t
    finalize(d, root)
    t = time.perf_counter()
    log(f"ardlab: {library}: %test")
    run_section(d, "test", root, env=_clean_env(), binds=[], log_path=work / library / "test.log", with_env=True)
    proof.seconds["test"] = time.perf_counter() - t
    proof.root_bytes = rootfs.size_bytes(root)
    leftover = rootfs.mounts_under(root)
    if leftover:
        raise RuntimeError(f"the proof left mounts behind: {', '.join(leftover)}")
    return proof


def copy_files(d: definition.Definition, root: Path) -> None:
    """%files: each source (relative to where the build runs, the repository root) copied to its destination."""
    for src, dest in d.files():
        source = ROOT / src
        if not source.exists():
            raise SectionFailed(f"{d.path}: %files: {src} does not exist (paths are relative to {ROOT})")
        target = root / dest.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():  # all of it, as Apptainer copies it
            shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(source, target)


def finalize(d: definition.Definition, root: Path) -> None:
    """What Apptainer writes after %post: the %environment file and the runscript, in /.singularity.d."""
    env = root / ENV_FILE.lstrip("/")
    env.parent.mkdir(parents=True, exist_ok=True)
    env.write_text("#!/bin/sh\n" + d.section("environment").text)
    run = root / RUNSCRIPT.lstrip("/")
    run.write_text("#!/bin/sh\n" + d.section("runscript").text)
    run.chmod(0o755)


def run_section(d: definition.Definition, name: str, root: Path, env: dict[str, str], binds: list[str],
                log_path: Path, with_env: bool = False, timeout_s: float = 3600) -> None:
    """Run one script section in the root, isolated; a failure names the .def line of the command that failed."""
    sec = d.section(name)
    if not sec.text.strip():
        return
    script = root / f".ardlab-{name}.sh"
    script.write_text(sec.text)
    inner = [sec.shell, "-x", f"/.ardlab-{name}.sh"]
    if with_env:  # as `apptainer test`: the image's environment first
        inner = ["/bin/sh", "-c", f'. {ENV_FILE}; exec "$@"', "sh", *inner]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # mount points the binds make in the root are removed afterwards: the image keeps nothing of the build host
    targets = [root / b.split(":", 1)[1].lstrip("/") for b in binds]
    made = [t for t in targets if not t.exists()]
    with open(log_path, "w") as log:
        try:
            proc = subprocess.run(isolated_argv(root, inner, binds), env={**env, "PS4": "+ "},
                                  stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s)
        except subprocess.TimeoutExpired as e:
            raise SectionFailed(f"{d.path}: %{name} did not finish in {timeout_s:.0f} s (log: {log_path})") from e
        finally:
            script.unlink(missing_ok=True)
            for target in made:
                if target.is_dir():
                    target.rmdir()
                else:
                    target.unlink(missing_ok=True)
    if proc.returncode != 0:
        line, command = failed_line(log_path.read_text(), sec.text)
        where = f"{d.path}:{sec.def_line(line)}" if line else f"{d.path}: %{name}"
        raise SectionFailed(f"{where}: %{name} failed (exit {proc.returncode}) at `{command}`; "
                            f"log: {log_path}")


def failed_line(log: str, script: str) -> tuple[int | None, str]:
    """The script line (1-based) and the command of the last command the shell traced (-x: `+ command`).

    dash (Debian's /bin/sh, what Apptainer runs) has no $LINENO in its trace, so the traced commands are followed
    through the script in order: each is found on the first line at or after the previous one that has its command
    word (the trace shows expansions, the script their source; the word is what both share)."""
    traced = [text[2:] for text in log.splitlines() if text.startswith("+ ") and text[2:].split()]
    if not traced:
        return None, "(no command traced)"
    lines = script.splitlines()
    pos, line = 0, None
    for command in traced:
        word = command.split()[0]
        for i in range(pos, len(lines)):
            if word in re.split(r"[\s;|&()]+", lines[i].split("#", 1)[0]):
                pos, line = i, i + 1
                break
    return line, traced[-1]


def isolated_argv(root: Path, inner: list[str], binds: list[str]) -> list[str]:
    """The command that runs `inner` chrooted in `root`, in new mount and PID namespaces."""
    return ["unshare", "--mount", "--pid", "--fork", "--kill-child", "--propagation", "private", "--",
            "/bin/sh", "-c", _ENTER, "ardlab-enter", str(root), "own", *binds, "--", *inner]


def exec_argv(root: Path, command: list[str], cwd: str | None = None) -> list[str]:
    """`apptainer exec`'s equivalent for a proven root: the host's /tmp and cwd bound in, the image's environment
    applied over the caller's (srun's PMI settings pass through), then `command`."""
    cwd = cwd or os.getcwd()
    binds = ["/tmp:/tmp", f"{cwd}:{cwd}"]
    # The image's own software only: the host's PATH and library/Python search paths do not reach inside (a host
    # PYTHONPATH would make the image run the host's ardlab).
    inner = ["/bin/sh", "-c", f"unset {' '.join(HOST_ONLY)}; PATH={BASE_PATH}; . {ENV_FILE}; cd {shlex.quote(cwd)}; "
             'exec "$@"', "sh", *command]
    return ["unshare", "--mount", "--fork", "--kill-child", "--propagation", "private", "--",
            "/bin/sh", "-c", _ENTER, "ardlab-enter", str(root), "host", *binds, "--", *inner]


def build_env() -> dict[str, str]:
    """%post's environment: a clean one, plus the site's settings for reaching registries."""
    env = _clean_env()
    env.update({k: os.environ[k] for k in SITE_SETTINGS if k in os.environ})
    if _site_ca():
        env.update({k: CA_IN_ROOT for k in CA_SETTINGS})
    return env


def site_binds() -> list[str]:
    ca = _site_ca()
    return [f"{ca}:{CA_IN_ROOT}"] if ca else []


def _site_ca() -> str | None:
    """The CA bundle the host's pip is told to trust (a TLS-intercepting proxy's), if any."""
    for k in CA_SETTINGS:
        if os.environ.get(k) and Path(os.environ[k]).is_file():
            return os.environ[k]
    return None


def _clean_env() -> dict[str, str]:
    return {"PATH": BASE_PATH, "HOME": "/root", "LANG": "C.UTF-8", "TERM": "dumb"}


def _prove_with_apptainer(library: str, path: Path, work: Path, log) -> Proof:
    proof = Proof(library, "apptainer", base=definition.read(path).base)
    sif = work / f"ardlab-{library}.sif"
    sif.parent.mkdir(parents=True, exist_ok=True)
    flags = [] if os.geteuid() == 0 else ["--fakeroot"]
    for phase, argv in (("build", ["apptainer", "build", *flags, "--force", str(sif), str(path)]),
                        ("test", ["apptainer", "test", str(sif)])):
        t = time.perf_counter()
        log(f"ardlab: {library}: {' '.join(argv)}")
        proc = subprocess.run(argv, cwd=ROOT)
        if proc.returncode != 0:
            raise SectionFailed(f"{path}: apptainer {phase} failed (exit {proc.returncode})")
        proof.seconds[phase] = time.perf_counter() - t
    proof.root_bytes = sif.stat().st_size
    return proof
