"""`python -m ardlab.images prove|exec` (also `ardlab image ...`): the definitions proven in fresh Debian roots.

    python -m ardlab.images prove                 # all three definitions: %files, %post, %environment, %test
    python -m ardlab.images prove mpich --srun    # one, then its ranks under srun on 2 emulated nodes
    python -m ardlab.images exec --root R -- CMD  # CMD inside a proven root, as `apptainer exec` would run it
    python -m ardlab.images srun-check [LIB ...]  # the built images under srun on the emulated cluster's 2 nodes
    python -m ardlab.images key source|commit     # what containers/build writes into an image's labels
    python -m ardlab.images key stack --definition DEF
    python -m ardlab.images check-image LIB IMAGE # refuse an image that does not hold this checkout's ardlab
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ardlab.images import rootfs

    sub = p.add_subparsers(dest="action", required=True)
    pr = sub.add_parser("prove", help="build and test containers/<library>.def in a fresh Debian root (root), or "
                        "with apptainer build/test where Apptainer exists")
    pr.add_argument("libraries", nargs="*", help="default: every library of the table")
    pr.add_argument("--work", type=Path, default=rootfs.cache_dir() / "roots",
                    help="where the roots are made, one folder per library (default %(default)s)")
    pr.add_argument("--refresh-base", action="store_true", help="debootstrap a new base instead of the cached one")
    pr.add_argument("--srun", action="store_true", help="then start ranks inside each root under srun on an "
                    "emulated 2-node cluster (brought up and down here unless one is up)")
    pr.add_argument("--output", type=Path, help="a CSV (and .md) of the phases' seconds and the roots' sizes")
    ex = sub.add_parser("exec", help="run a command inside a proven root, as `apptainer exec` would")
    ex.add_argument("--root", type=Path, required=True)
    ex.add_argument("command", nargs=argparse.REMAINDER)
    sc = sub.add_parser("srun-check", help="each built image under `srun apptainer exec` on the emulated cluster's "
                        "nodes: its ranks' nodes, the validated Allreduce, a Horovod step (ardlab.images.srun_images)")
    sc.add_argument("libraries", nargs="*", help="default: every library of the table")
    sc.add_argument("--images", type=Path, default=Path(".cache/images"), help="where containers/build wrote them "
                    "(default %(default)s)")
    sc.add_argument("--nodes", type=int, default=2)
    sc.add_argument("--ranks-per-node", type=int, default=1, help="ranks on each node, each in a container of its "
                    "own (default %(default)s)")
    sc.add_argument("--output", type=Path, required=True, help="folder for <library>_allreduce.csv and "
                    "<library>_horovod.csv")
    ky = sub.add_parser("key", help="an image layer's key from this checkout (ardlab.images.provenance)")
    ky.add_argument("what", choices=("stack", "source", "commit"))
    ky.add_argument("--definition", type=Path, help="the stack's definition as built (for 'stack')")
    ci = sub.add_parser("check-image", help="refuse an image whose ardlab is not this checkout's (its labels)")
    ci.add_argument("library")
    ci.add_argument("image", type=Path)


def run(args: argparse.Namespace) -> int:
    from ardlab.comm.libraries import BUILT_IN
    from ardlab.images import prove

    if args.action in ("key", "check-image"):
        from ardlab.images import provenance

        if args.action == "check-image":
            found = provenance.check(args.image, args.library)
            print(f"ardlab: {args.image} holds this checkout's ardlab ({found[provenance.LABEL_SOURCE]})")
        elif args.what == "stack":
            if not args.definition:
                raise ValueError("key stack needs --definition (the stack's definition as built)")
            print(provenance.stack_key(args.definition))
        else:
            print(provenance.source_key() if args.what == "source" else provenance.commit())
        return 0
    if args.action == "exec":
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        if not command:
            raise ValueError("exec needs a command after --")
        argv = prove.exec_argv(args.root.resolve(), command)
        os.execvp(argv[0], argv)
    libraries = args.libraries or list(BUILT_IN)  # the images hold the wheels' libraries
    if args.action == "srun-check":
        from ardlab.images import srun_images

        srun_images.check_ready(args.images, libraries)
        for lib in libraries:
            names = srun_images.check(lib, srun_images.image_path(args.images, lib).resolve(), args.output,
                                      nodes=args.nodes, ranks_per_node=args.ranks_per_node)
            print(f"ardlab: {lib}: its image ran on {' '.join(names)}: rows in {args.output}", flush=True)
        return 0
    prove.check_can_prove(libraries)
    rows = []
    for lib in libraries:
        p = prove.prove(lib, args.work.resolve(), refresh_base=args.refresh_base)
        row = p.row()
        if args.srun:
            row.update(_srun(lib, p.root))
        rows.append(row)
        print(f"ardlab: {lib}: proven ({p.method}): {row}", flush=True)
    import pandas as pd  # the driver's environment has it; a library's (or an image's) need not

    table = pd.DataFrame(rows)
    print(table.to_markdown(index=False))
    if args.output:  # atomically, with its Markdown beside it
        from ardlab.results import save_frame

        args.output.parent.mkdir(parents=True, exist_ok=True)
        save_frame(table, args.output)
    return 0


def _srun(lib: str, root: Path) -> dict:
    from ardlab import cluster
    from ardlab.images.srun import ranks_in_root

    up = cluster.Cluster.load(cluster.default_state().resolve())
    made = up is None
    c = cluster.up(2, "1gbit") if made else up
    try:
        r = ranks_in_root(lib, root, c.env())
    finally:
        if made:
            cluster.down()
    return {"srun_hosts": " ".join(r.hosts), "srun_rows": len(r.rows)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ardlab.images", description=__doc__.splitlines()[0])
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run(args)
    except (ValueError, FileNotFoundError, RuntimeError, PermissionError) as e:
        print(f"ardlab: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
