"""The emulated cluster's Slurm: one munged, slurmctld in its own namespace, one slurmd per node namespace.

Each daemon of a host starts as ``nsenter --net=<its namespace> unshare --uts --mount --propagation private``,
so that inside it has its own hostname, the cluster's hosts file over /etc/hosts and its slurm.conf in
/etc/slurm (jobs and their srun find it without SLURM_CONF, which Snakemake's job steps drop), its own
/proc/sys/kernel/random/boot_id (else UCX and the libraries' shared-memory transports take all "nodes" for one
host and never touch the network) and its own /dev/shm (so what jobs leave there goes when the node goes).
Everything it writes lives under the state folder. Standard library only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

from ardlab.cluster import network
from ardlab.comm.libraries import PMI2_LIBRARY

PACKAGES = ("slurm-wlm", "slurmctld", "slurmd", "slurm-client", "munge", "slurm-wlm-basic-plugins", "libpmix2",
            "libpmix-dev", "libpmix-bin", "libpmi2-0", "iproute2", "util-linux")
COMMANDS = ("slurmctld", "slurmd", "srun", "sinfo", "munged", "ip", "tc", "nsenter", "unshare")
# Slurm's mpi/pmix plugin opens the unversioned library (libpmix-dev); Intel MPI loads Debian's PMI-2 client.
LIBRARIES = ("/usr/lib/x86_64-linux-gnu/pmix2/lib/libpmix.so", PMI2_LIBRARY)


def install() -> None:
    """Install the Debian packages the cluster needs when a command is missing (needs root and apt)."""
    missing = [c for c in COMMANDS if shutil.which(c) is None] + [f for f in LIBRARIES if not Path(f).exists()]
    if not missing:
        return
    if shutil.which("apt-get") is None:
        raise RuntimeError(f"missing {', '.join(missing)} and no apt-get to install them: install "
                           f"{' '.join(PACKAGES)} (or your system's equivalents)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES]
    if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True)
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"installing {' '.join(PACKAGES)} failed: {proc.stderr.strip()[-2000:]}")


def conf_text(state: Path, addrs: dict[str, str], cpus: int, mem_mb: int) -> str:
    nodes = [h for h in addrs if h.startswith("n")]
    lines = [
        "# written by `ardlab cluster up`; removed by `ardlab cluster down`",
        "ClusterName=ardlab-emulated",
        f"SlurmctldHost=ctl({addrs['ctl']})",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={state / 'munge' / 'munge.socket'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "MpiDefault=pmi2",
        "ReturnToService=2",
        "SlurmdParameters=config_overrides",
        f"StateSaveLocation={state / 'ctl' / 'spool'}",
        f"SlurmctldPidFile={state / 'ctl' / 'slurmctld.pid'}",
        f"SlurmctldLogFile={state / 'ctl' / 'slurmctld.log'}",
        f"SlurmdSpoolDir={state / 'nodes' / '%n' / 'spool'}",
        f"SlurmdPidFile={state / 'nodes' / '%n' / 'slurmd.pid'}",
        f"SlurmdLogFile={state / 'nodes' / '%n' / 'slurmd.log'}",
        # PMIx and Slurm put step folders here: one per node, or they collide ("File exists")
        f"TmpFS={state / 'nodes' / '%n' / 'tmp'}",
        *(f"NodeName={h} NodeAddr={addrs[h]} CPUs={cpus} RealMemory={mem_mb} State=UNKNOWN" for h in nodes),
        f"PartitionName=emulated Nodes={','.join(nodes)} Default=YES MaxTime=INFINITE State=UP",
    ]
    return "\n".join(lines) + "\n"


def hosts_text(addrs: dict[str, str]) -> str:
    """The nodes' hosts file: every node, the controller, and this machine (the login node, at the bridge's address)
    under its own name, so that a program run here whose nodes call back (MPICH's mpiexec under salloc: its proxies
    connect to it) is found by name, as on a cluster whose nodes resolve the login node."""
    import socket

    login = f"{addrs['bridge']} {socket.gethostname()}\n" if "bridge" in addrs else ""
    return "127.0.0.1 localhost\n" + "".join(f"{a} {h}\n" for h, a in addrs.items() if h != "bridge") + login


def _spawn(argv: list[str], log: Path) -> int:
    """Start a daemon in the foreground of its own session (it outlives this command); its pid."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)
    return proc.pid


def start_munge(state: Path) -> int:
    d = state / "munge"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = d / "munge.key"
    if not key.exists():
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
    return _spawn(["munged", "--foreground", "--force", f"--socket={d / 'munge.socket'}",
                   f"--key-file={key}", f"--pid-file={d / 'munged.pid'}", f"--seed-file={d / 'munged.seed'}",
                   f"--log-file={d / 'munged.log'}"], d / "munged.out")


def start_host(state: Path, host: str, daemon: list[str]) -> int:
    """Start `daemon` as host `host`: its namespace, hostname, hosts file, boot_id and /dev/shm."""
    d = state / ("ctl" if host == "ctl" else f"nodes/{host}")
    for sub in ("spool", "tmp"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    boot_id = d / "boot_id"
    boot_id.write_text(f"{uuid.uuid4()}\n")
    etc = state / "etc-slurm"  # what a node's /etc/slurm holds: the cluster's slurm.conf, as on a real cluster
    etc.mkdir(exist_ok=True)
    if not (etc / "slurm.conf").is_symlink():
        (etc / "slurm.conf").symlink_to(state / "slurm.conf")
    script = (f"hostname {host} && mount --bind {state / 'hosts'} /etc/hosts && mount --bind {etc} /etc/slurm"
              f" && mount --bind {boot_id} /proc/sys/kernel/random/boot_id"
              f" && mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec \"$@\"")
    argv = ["nsenter", f"--net={network.NETNS_DIR / network.namespace(host)}", "unshare", "--uts", "--mount",
            "--propagation", "private", "--", "sh", "-c", script, "sh", *daemon]
    return _spawn(argv, d / "daemon.out")
