"""Each Apptainer image run the way a site runs it: the host's ``srun --mpi=<the table's plugin> -N 2 apptainer exec
IMAGE ardlab ...`` on the emulated cluster's nodes, one rank a node (issue 40) or several (issue 54: each rank then in
a container of its own beside its node's others, with the table's ``container_peer_env``).

Three launches per image: the ranks name their nodes (two distinct), the validated Allreduce (``ardlab bench allreduce
--in-mpi --validate``, the library's default) and a Horovod step (``ardlab train-tf --in-mpi``, simplecnn on digits).
The rows are written as ``<library>_allreduce.csv`` and ``<library>_horovod.csv`` in the output folder.

    python -m ardlab.images srun-check [--images .cache/images] [--output DIR] [LIBRARY ...]

Needs an emulated cluster that is up (``ardlab cluster up``, its settings in the environment) and ``apptainer`` on
PATH (here: ``.cache/apptainer/bin``, after containers/setup-apptainer).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ardlab.images.srun import HOSTS, node_names


def image_path(images: Path, library: str) -> Path:
    """The image containers/build writes for `library` (ardlab-<library>.sif)."""
    return Path(images) / f"ardlab-{library}.sif"


def check_ready(images: Path, libraries: list[str]) -> None:
    """Refuse, before anything runs, what would fail in the first launch."""
    from ardlab.comm.libraries import library

    for lib in libraries:
        library(lib)  # an unknown one: ValueError naming it and the valid ones
    missing = [str(image_path(images, lib)) for lib in libraries if not image_path(images, lib).is_file()]
    if missing:
        raise FileNotFoundError(f"no image {', '.join(missing)} (containers/build --base debootstrap LIBRARY makes it)")
    require_apptainer_and_cluster()


def require_apptainer_and_cluster() -> None:
    """Refuse where images cannot run under srun here: no `apptainer` on PATH, or no cluster in the environment."""
    if shutil.which("apptainer") is None:
        raise FileNotFoundError("apptainer is not on PATH (here: PATH=$PWD/.cache/apptainer/bin:$PATH, after "
                                "containers/setup-apptainer)")
    if not os.environ.get("SLURM_CONF"):
        raise RuntimeError('no emulated cluster in the environment: ardlab cluster up, then eval "$(ardlab cluster '
                           'env)"')


def launch(library: str, nodes: int, image: Path, command: list[str], cwd: str, timeout_s: float = 600,
           ranks_per_node: int = 1, settings: dict[str, str] | None = None, stderr: bool = False) -> str:
    """`apptainer exec --cleanenv IMAGE <command>` (ardlab.images.clean) as `ranks_per_node` ranks on each of
    `nodes` nodes under the table's srun (at several a node with the table's ``container_peer_env`` and,
    time-sharing this machine's cores, its ``time_shared_env``: the caller's own values win) and `settings`; its
    output (`stderr`: its standard error after it)."""
    from ardlab.comm.launch import srun_command, srun_settings
    from ardlab.comm.libraries import library as table
    from ardlab.images.clean import exec_argv

    ranks = nodes * ranks_per_node
    lib = table(library)
    extra = {**srun_settings(library, ranks, nodes, time_shared=ranks > (os.cpu_count() or 1), image=True),
             **(settings or {})}
    argv, env = srun_command(library, ranks, nodes, exec_argv(str(image), command, keep=[*extra, *lib.srun_env]),
                             extra_env=extra)
    try:
        proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"`{' '.join(argv)}` did not finish in {timeout_s:.0f} s") from e
    if proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv)}` failed (exit {proc.returncode}):\n"
                           f"{(proc.stdout + proc.stderr)[-3000:]}")
    return proc.stdout + ("\n" + proc.stderr if stderr else "")


def check(library: str, image: Path, output: Path, nodes: int = 2, sizes: str = "4,64K,1M,4M",
          ranks_per_node: int = 1) -> list[str]:
    """The three launches for one image; the node names its ranks ran on. Rows land in `output` only when whole."""
    from dataclasses import asdict

    from ardlab.comm.libraries import library as table
    from ardlab.comm.transport import parse, settings
    from ardlab.results import atomic_open

    # what carries the bytes, read by the transport probe (ardlab.comm.transport) in a launch of the same shape inside
    # the image with the library's reports on, handed to the --in-mpi launches' rows (ardlab.comm.transport.GIVEN)
    lib = table(library)
    said = launch(library, nodes, image, ["python3", "-m", "ardlab.comm.transport"], "/tmp",
                  ranks_per_node=ranks_per_node, settings=dict(lib.transport_report_env), stderr=True)
    given = settings(asdict(parse(lib.family, said)))
    work = tempfile.mkdtemp(prefix=f"ardlab-srun-{library}-", dir="/tmp")  # a folder the image sees (/tmp is bound)
    try:
        names = node_names(launch(library, nodes, image, ["python3", "-c", HOSTS], work, ranks_per_node=ranks_per_node),
                           library, nodes)
        bench, train = Path(work) / "allreduce.csv", Path(work) / "horovod.csv"
        launch(library, nodes, image, ["ardlab", "bench", "allreduce", "--in-mpi", "--library", library, "--sizes",
                                       sizes, "--validate", "--no-progress", "--output", str(bench)], work,
               ranks_per_node=ranks_per_node, settings=given)
        launch(library, nodes, image, ["ardlab", "train-tf", "--in-mpi", "--library", library, "--model", "simplecnn",
                                       "--dataset", "digits", "--batch-per-rank", "8", "--warmup-batches", "1",
                                       "--iterations", "1", "--batches-per-iter", "4", "--no-progress", "--output",
                                       str(train)], work, ranks_per_node=ranks_per_node, settings=given)
        output.mkdir(parents=True, exist_ok=True)
        for src, name in ((bench, "allreduce"), (train, "horovod")):
            with atomic_open(output / f"{library}_{name}.csv", "w") as f:
                f.write(src.read_text())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return names
