"""The fabric's user space a library environment needs: which of its transport plugins cannot load, and why.

The three wheels bring their own UCX and libfabric with plugins for InfiniBand, RoCE, EFA and Omni-Path (UCX's
``ucx/libuct_*.so`` transports, libfabric's ``*-fi.so`` providers), but not the system libraries those plugins
load: rdma-core's ``libibverbs.so.1``, ``librdmacm.so.1`` and its providers' ``libmlx5.so.1``/``libefa.so.1``,
PSM2's ``libpsm2.so.2``, and (Intel MPI's ``mlx`` provider) UCX's ``libucp.so.0``. A plugin that cannot load is
skipped without a word, and the library runs over TCP; on a fast network that is the number every figure would
show. ``missing`` finds such plugins with the dynamic linker itself (``ldd``); the images install the table's
``fabric_debs`` so that none is left (their ``%test`` runs ``python -m ardlab.comm fabric LIBRARY``).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

# The transport plugins of an environment, by the names UCX and libfabric give them.
PLUGIN_PATTERNS = ("libuct_*.so*", "*-fi.so")


def plugins(prefix: Path) -> list[Path]:
    """The transport plugins under the environment `prefix`'s lib folder (UCX transports, libfabric providers)."""
    lib = Path(prefix) / "lib"
    found = {p for pattern in PLUGIN_PATTERNS for p in lib.rglob(pattern) if "site-packages" not in p.parts}
    return sorted(found)


def missing(prefix: Path) -> dict[str, list[str]]:
    """Per transport plugin of the environment `prefix` (its path under lib/), the shared libraries the dynamic
    linker does not find for it: those the system must provide. Plugins that load are left out."""
    prefix = Path(prefix)
    # the environment's lib folders, as the library's loader searches them (each plugin's own folder goes first)
    folders = [str(prefix / "lib"), *map(str, sorted((prefix / "lib").glob("*/"))),
               os.environ.get("LD_LIBRARY_PATH", "")]
    out: dict[str, list[str]] = {}
    for plugin in plugins(prefix):
        env = {**os.environ, "LD_LIBRARY_PATH": ":".join([str(plugin.parent), *folders])}
        shown = subprocess.run(["ldd", str(plugin)], env=env, capture_output=True, text=True, timeout=60)
        if shown.returncode != 0:
            raise RuntimeError(f"ldd could not read {plugin}: {shown.stderr.strip()}")
        lost = sorted({line.split("=>")[0].strip() for line in shown.stdout.splitlines() if "not found" in line})
        if lost:
            out[str(plugin.relative_to(prefix / "lib"))] = lost
    return out


def report(library_name: str, prefix: Path) -> str:
    """What `missing` found in words, one plugin a line; empty where every plugin loads."""
    lost = missing(prefix)
    return "\n".join(f"{library_name}: {plugin} cannot load: {', '.join(libs)} not found"
                     for plugin, libs in lost.items())
