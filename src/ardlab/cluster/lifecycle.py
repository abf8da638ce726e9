"""The emulated cluster's lifecycle: bring it up (namespaces, links, Slurm's daemons), record it (``Cluster``,
``cluster.json`` in the state folder), watch it, cancel its jobs, stop a run on it, and take it down again leaving
nothing behind. The package's face (``ardlab.cluster``) re-exports what callers use."""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ardlab.cluster import network, slurm
from ardlab.cluster.links import DEFAULT_QUEUE, check_queue, check_rate, queue_name
from ardlab.comm.launch import repo_root

DEFAULT_SUBNET = "10.77.0.0/24"


def _reachable_by_all(path: Path) -> bool:
    """Whether every user may reach `path` (each folder on the way searchable by others, the path itself readable)."""
    path = path.resolve()
    if not path.exists() or not path.stat().st_mode & 0o004:
        return False
    return all(p.stat().st_mode & 0o001 for p in path.parents)


def default_state() -> Path:
    env = os.environ.get("ARDLAB_CLUSTER")
    return Path(env) if env else repo_root() / ".cluster"


@dataclass
class Cluster:
    state: str
    nodes: int
    rate: str | None = None  # per link and direction, tc's notation (1gbit, 250mbit); None: unlimited
    queue: str = DEFAULT_QUEUE  # what a link queues behind its rate before it drops (ardlab.cluster.links.QUEUES)
    subnet: str = DEFAULT_SUBNET
    addresses: dict[str, str] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return Path(self.state) / "slurm.conf"

    @property
    def hosts(self) -> list[str]:
        return [f"n{i}" for i in range(1, self.nodes + 1)]

    def env(self) -> dict[str, str]:
        """What a client in the root namespace needs: sbatch, srun, sinfo, snakemake's slurm executor; and what ranks
        in Apptainer images need to know where they run (result rows' link_rate and threads_per_core): the cluster's
        state folder and the machine's /etc/machine-id bound into them (APPTAINER_BIND, after the caller's own)."""
        binds = [b for b in os.environ.get("APPTAINER_BIND", "").split(",") if b]
        # a folder another user cannot reach would fail every exec (Apptainer stats a bind as the user): left out
        binds += [b for b in (self.state, "/etc/machine-id") if b not in binds and _reachable_by_all(Path(b))]
        return {"SLURM_CONF": str(self.conf), "APPTAINER_BIND": ",".join(binds)}

    def save(self) -> None:
        (Path(self.state) / "cluster.json").write_text(json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def load(cls, state: Path) -> "Cluster | None":
        path = Path(state) / "cluster.json"
        return cls(**json.loads(path.read_text())) if path.is_file() else None


def _require_root() -> None:
    if os.geteuid() != 0:
        raise PermissionError("the emulated cluster needs root (network namespaces, bridge, mounts, Slurm daemons "
                              "as SlurmUser=root); run it as root or on a real cluster")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def _sinfo(c: Cluster) -> dict[str, str]:
    """node -> Slurm state, as sinfo reports it ({} while slurmctld does not answer)."""
    proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], env={**os.environ, **c.env()}, capture_output=True,
                          text=True, timeout=30)
    if proc.returncode != 0:
        return {}
    return dict(line.split() for line in proc.stdout.splitlines() if line.strip())


def up(nodes: int, rate: str | None = None, *, state: Path | None = None, subnet: str = DEFAULT_SUBNET,
       cpus: int | None = None, timeout: float = 60, queue: str | None = None) -> Cluster:
    """Bring up (or find up, with the same shape) a cluster of `nodes` nodes, its links at `rate` queueing `queue`
    (``ardlab.cluster.links.check_queue``; default DEFAULT_QUEUE); its description."""
    _require_root()
    if nodes < 1:
        raise ValueError(f"nodes must be >= 1, got {nodes}")
    rate = check_rate(rate)
    queue = check_queue(queue)
    state = Path(state or default_state()).resolve()
    try:
        net = ipaddress.ip_network(subnet)
    except ValueError as e:
        raise ValueError(f"subnet {subnet!r} is not an IPv4 network like {DEFAULT_SUBNET}: {e}") from None
    if net.version != 4:
        raise ValueError(f"subnet {subnet!r} is not an IPv4 network like {DEFAULT_SUBNET}")
    old = Cluster.load(state)
    if old is not None:
        if (old.nodes, old.rate, old.queue, old.subnet) == (nodes, rate, queue, str(net)) \
                and all(map(_alive, old.pids.values())) \
                and set(_sinfo(old)) == set(old.hosts):
            return old
        if all(map(_alive, old.pids.values())):
            raise RuntimeError(f"a cluster of {old.nodes} nodes (rate {old.rate or 'unlimited'}, queue {old.queue}, "
                               f"{old.subnet}) is up "
                               f"at {state}; run `ardlab cluster down` first")
        down(state)  # what a crash left
    clashes = network.in_use(net)
    if clashes:
        raise ValueError(f"subnet {net} is already in use on this machine ({'; '.join(clashes)}); "
                         "choose another with --subnet")
    spaces, links = network.ours()
    if spaces or links:
        raise RuntimeError(f"namespaces or links of another emulated cluster exist ({', '.join(spaces + links)}); "
                           "run `ardlab cluster down --state <its folder>` (or `ardlab cluster down`) first")
    slurm.install()
    state.mkdir(parents=True, exist_ok=True)
    c = Cluster(state=str(state), nodes=nodes, rate=rate, queue=queue, subnet=str(net),
                addresses=network.addresses(net, nodes))
    c.save()  # before anything is made: `down` finds it after a crash
    try:
        network.create(net, c.addresses, rate, queue)
        cpus = cpus or os.cpu_count() or 1
        mem = int(int(Path("/proc/meminfo").read_text().split()[1]) / 1024 * 0.8 / nodes)
        (state / "hosts").write_text(slurm.hosts_text(c.addresses))
        c.conf.write_text(slurm.conf_text(state, c.addresses, cpus, mem))
        c.pids["munged"] = slurm.start_munge(state)
        _wait(lambda: (state / "munge" / "munge.socket").exists(), timeout, "munged did not open its socket", state)
        conf = str(c.conf)
        c.pids["slurmctld"] = slurm.start_host(state, "ctl", ["slurmctld", "-D", "-i", "-f", conf])
        for h in c.hosts:
            c.pids[f"slurmd-{h}"] = slurm.start_host(state, h, ["slurmd", "-D", "-f", conf, "-N", h])
        c.save()
        _wait(lambda: list(_sinfo(c).values()) == ["idle"] * nodes, timeout, "the nodes did not become idle", state)
    except BaseException:
        down(state, keep_logs=True)
        raise
    return c


def _wait(ready, timeout: float, what: str, state: Path) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if ready():
            return
        time.sleep(0.2)
    raise RuntimeError(f"{what} within {timeout:g} s; logs are under {state}")


def _processes_in(namespaces: set[int]) -> list[int]:
    """Pids of every process whose network namespace is one of `namespaces` (inode numbers)."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if os.stat(p / "ns" / "net").st_ino in namespaces:
                    out.append(int(p.name))
            except OSError:
                continue
    return out


def down(state: Path | None = None, *, keep_logs: bool = False) -> list[str]:
    """Stop every daemon and job of the cluster, remove its namespaces, links and state folder; what was removed.
    Safe to run twice and after a crash (it also finds what a lost state file named)."""
    _require_root()
    state = Path(state or default_state()).resolve()
    c = Cluster.load(state)
    spaces, _ = network.ours()
    inodes = {os.stat(network.NETNS_DIR / ns).st_ino for ns in spaces}
    pids = set(_processes_in(inodes)) | set(c.pids.values() if c else ())
    munge_pid = state / "munge" / "munged.pid"
    if munge_pid.is_file():
        pids.add(int(munge_pid.read_text().split()[0]))
    pids = {p for p in pids if p != os.getpid() and _alive(p)}
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        end = time.monotonic() + wait
        while time.monotonic() < end and any(map(_alive, pids)):
            time.sleep(0.1)
        pids = {p for p in pids if _alive(p)}
        if not pids:
            break
    if pids:
        raise RuntimeError(f"processes {sorted(pids)} of the cluster did not stop")
    removed = network.remove()
    if state.exists() and (c is not None or (state / "slurm.conf").exists()):
        if keep_logs:
            for f in state.rglob("*"):
                # the logs say why, and cluster.json lets the next `up` or `down` remove them
                if f.is_file() and not f.name.endswith((".log", ".out")) and f.name != "cluster.json":
                    f.unlink()
        else:
            shutil.rmtree(state)
        removed.append(str(state))
    return removed


def dead_daemons(state: Path | None = None) -> list[str]:
    """The cluster's daemons (slurmctld, each node's slurmd, munged) that are no longer running."""
    c = Cluster.load(Path(state or default_state()).resolve())
    if c is None:
        raise RuntimeError("no emulated cluster is up; start one with `ardlab cluster up`")
    return [name for name, pid in c.pids.items() if not _alive(pid)]


def watch(pid: int, state: Path | None = None, interval: float = 2.0) -> list[str] | None:
    """While process `pid` (workflow/run-cluster) lives, check the cluster's daemons every `interval` seconds; the
    daemons found gone (a node lost: its slurmd killed or crashed), or None when the run ended first. The caller
    reports the loss, then calls `stop_run`: reporting first, because stopping the run ends workflow/run-cluster,
    whose exit kills this watcher."""
    while _alive(pid):
        dead = dead_daemons(state)
        if dead:
            return dead
        time.sleep(interval)
    return None


def stop_run(pid: int, state: Path | None = None) -> None:
    """Stop the run `pid` (workflow/run-cluster) after a node was lost: cancel the cluster's Slurm jobs (a job's rows
    are written only when it completes, so the one in flight writes nothing), then stop the children of `pid`
    (Snakemake: SIGTERM, then SIGKILL if it still waits for a job the lost node holds; its next start clears the
    lock)."""
    cancel_jobs(state)
    children = [c for c in _children(pid) if c != os.getpid()]
    for sig in (signal.SIGTERM, signal.SIGKILL):  # SIGKILL if it still waits for a job a lost node holds
        for child in children:
            if _alive(child):
                os.kill(child, sig)
        end = time.monotonic() + 20
        while time.monotonic() < end and any(map(_alive, children)):
            time.sleep(0.5)


def _children(pid: int) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and int((p / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(p.name))
        except (OSError, IndexError, ValueError):
            continue
    return out


def cancel_jobs(state: Path | None = None) -> list[str]:
    """Cancel every Slurm job on the cluster (left running by a run that was killed outright: Slurm keeps a job
    when the Snakemake that submitted it dies); the ids cancelled."""
    c = Cluster.load(Path(state or default_state()).resolve())
    if c is None:
        raise RuntimeError("no emulated cluster is up; start one with `ardlab cluster up`")
    env = {**os.environ, **c.env()}
    proc = subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise RuntimeError(f"squeue failed: {proc.stderr.strip()}")
    ids = proc.stdout.split()
    if ids:
        subprocess.run(["scancel", *ids], env=env, check=True, timeout=30)
        end = time.monotonic() + 60
        while time.monotonic() < end and subprocess.run(["squeue", "-h", "-o", "%i"], env=env, capture_output=True,
                                                        text=True, timeout=30).stdout.split():
            time.sleep(1)
    return ids


def status(state: Path | None = None) -> str:
    """A few lines: the cluster's shape, its daemons and what Slurm says of each node."""
    state = Path(state or default_state()).resolve()
    c = Cluster.load(state)
    if c is None:
        spaces, links = network.ours()
        left = f"; left behind: {', '.join(spaces + links)}" if spaces or links else ""
        return f"no emulated cluster at {state}{left}"
    lines = [f"emulated cluster at {state}: {c.nodes} nodes, links {c.rate or 'unlimited'}"
             + (f" queueing {queue_name(c.queue)} ({c.queue})" if c.rate else "") + f", {c.subnet}",
             f"  SLURM_CONF={c.conf}"]
    for name, pid in c.pids.items():
        lines.append(f"  {name:14s} pid {pid:<8d} {'running' if _alive(pid) else 'NOT RUNNING'}")
    nodes = _sinfo(c)
    lines.append("  nodes: " + (", ".join(f"{h} ({s}, {c.addresses[h]})" for h, s in nodes.items())
                                if nodes else "slurmctld does not answer"))
    return "\n".join(lines)
