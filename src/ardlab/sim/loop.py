"""ardlab's Allreduce timing loop under SimGrid's SMPI: ``smpiloop.c`` built with ``smpicc``, run with ``smpirun``,
one launch per cost family and message size, into tidy rows.

A family (``ardlab.comm.families``) names the SMPI settings that run its pattern (``Family.smpi``). SMPI falls back
to another algorithm where one does not apply (its ring below one element a rank, for one) and says so on its log:
such a row names the fallback, and is not that family's time. Computation is not simulated (``smpi/simulate-
computation:no``): the reduction's arithmetic costs nothing, a run is deterministic, and the times are the
network's alone (the cost model's alpha and beta terms; its gamma is measured, not simulated).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from ardlab.comm.families import FAMILIES, family
from ardlab.sim.platform import Link, write

SOURCE = Path(__file__).with_name("smpiloop.c")
TIMELOOP = Path(__file__).parents[1] / "bench" / "timeloop.c"
COLUMNS = ["simulator", "family", "smpi", "nodes", "ranks", "size_bytes", "iterations", "avg_us", "min_us", "max_us",
           "fallback", "link_rate", "link_latency_us", "loopback_rate", "loopback_latency_us"]
SIMULATED = tuple(name for name, f in FAMILIES.items() if f.smpi)  # the families SMPI has
# SMPI's log lines that say a collective ran another algorithm than the one asked for
FALLBACK = re.compile(r"\[smpi_colls/INFO\] (MPI_\w+: .*(?:use default|fall.?back|switch).*)", re.I)
# The network model: SMPI's, with its size-dependent latency and bandwidth factors at 1 (they were fitted to another
# cluster's network; a link here is what its rate and latency say, as the cost model assumes), and no computation.
# No privatization of global variables: the loop has none, and copies of them per rank cost memory at 1024 ranks.
MODEL = ("--cfg=smpi/lat-factor:0:1", "--cfg=smpi/bw-factor:0:1", "--cfg=smpi/simulate-computation:no",
         "--cfg=smpi/privatization:no")
SETUP = "containers/setup-envs installs SimGrid (Debian: apt-get install libsimgrid-dev)"


def tools() -> tuple[str, str]:
    """(smpicc, smpirun); FileNotFoundError naming the set-up where SimGrid is missing."""
    found = shutil.which("smpicc"), shutil.which("smpirun")
    if not all(found):
        raise FileNotFoundError(f"SimGrid's smpicc and smpirun are not on PATH: {SETUP}")
    return found


def version() -> str:
    """The simulator and its version, as the rows name it (e.g. "SimGrid 3.32")."""
    out = subprocess.run([tools()[1], "-version"], capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"SimGrid version (\S+)", out)
    if not m:
        raise RuntimeError(f"smpirun -version said no SimGrid version: {out[:200]!r}")
    return f"SimGrid {m.group(1)}"


def build(cache: Path | None = None) -> Path:
    """The timing loop built for SMPI, cached by its sources and SimGrid's version (built again when either
    changes; written under a temporary name and renamed, so a failed build leaves nothing)."""
    smpicc, _ = tools()
    key = hashlib.sha256(SOURCE.read_bytes() + TIMELOOP.read_bytes() + version().encode()).hexdigest()[:16]
    folder = Path(cache or Path.home() / ".cache" / "ardlab" / "sim") / key
    out = folder / "smpiloop"
    if out.is_file():
        return out
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".smpiloop.{id(folder)}.tmp"
    proc = subprocess.run([smpicc, "-O2", "-Wall", "-Werror", f"-I{TIMELOOP.parent}", str(SOURCE), "-o", str(tmp)],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"smpicc could not build {SOURCE}:\n{proc.stderr[-3000:]}")
    tmp.rename(out)
    return out


def settings(family_name: str) -> tuple[str, ...]:
    """The SMPI settings of a family; ValueError naming those SMPI has where it has none."""
    f = family(family_name)
    if not f.smpi:
        raise ValueError(f"SMPI has no algorithm of family {family_name!r}; it has: {', '.join(SIMULATED)}")
    return f.smpi


def run(family_name: str, nodes: int, ranks: int, sizes: list[int], link: Link, *, warmup: int = 1,
        iterations: int = 3, timeout: float = 900, binary: Path | None = None) -> list[dict]:
    """Rows of one family's Allreduce of each size (bytes, multiples of 4) on `ranks` ranks over `nodes` simulated
    nodes linked by `link`: one smpirun each. RuntimeError naming the launch where one fails."""
    cfg = settings(family_name)
    bad = [s for s in sizes if s < 4 or s % 4]
    if bad:
        raise ValueError(f"sizes must be whole float32 elements (multiples of 4 bytes), not {bad}")
    binary = binary or build()
    smpirun = tools()[1]
    simulator = version()
    rows = []
    with tempfile.TemporaryDirectory(prefix="ardlab-sim-") as folder:
        plat, hosts = write(Path(folder), nodes, ranks, link)
        for size in sizes:
            argv = [smpirun, "-np", str(ranks), "-platform", str(plat), "-hostfile", str(hosts),
                    *(f"--cfg=smpi/{s}" for s in cfg), *MODEL,
                    "--log=xbt_cfg.thresh:warning", str(binary), str(warmup), str(iterations), str(size)]
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=folder)
            times = [float(line.split(",")[2]) for line in proc.stdout.splitlines() if line.count(",") == 2]
            if proc.returncode != 0 or len(times) != iterations:
                raise RuntimeError(f"smpirun of {family_name} at {size} B on {ranks} ranks failed (exit "
                                   f"{proc.returncode}): {' '.join(argv)}\n{proc.stderr[-3000:]}")
            fallbacks = sorted(set(FALLBACK.findall(proc.stderr)))
            us = [t * 1e6 for t in times]
            rows.append({"simulator": simulator, "family": family_name, "smpi": " ".join(cfg), "nodes": nodes,
                         "ranks": ranks, "size_bytes": size, "iterations": iterations,
                         "avg_us": round(statistics.fmean(us), 3), "min_us": round(min(us), 3),
                         "max_us": round(max(us), 3), "fallback": "; ".join(fallbacks),
                         "link_rate": link.rate, "link_latency_us": link.latency_us,
                         "loopback_rate": link.loopback_rate, "loopback_latency_us": link.loopback_latency_us})
    return rows
