"""`python -m ardlab.cluster up|down|status|env` (also `ardlab cluster ...`): the emulated cluster's commands."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from ardlab import cluster
from ardlab.cluster.links import DEFAULT_QUEUE


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", required=True)
    u = sub.add_parser("up", help="start N node namespaces with slurmd, slurmctld and munge (idempotent)")
    u.add_argument("--nodes", type=int, default=2, help="number of nodes n1..nN (default 2)")
    u.add_argument("--rate", default="1gbit",
                   help="link rate per node and direction, tc notation (1gbit, 250mbit) or 'none' (default 1gbit)")
    u.add_argument("--queue", default=None,
                   help="what a link queues behind its rate before it drops: switch-port (a switch port's share of "
                        "its buffer, 233016 bytes), a time at the rate (1ms: tbf adds its 256 KiB bucket) or bytes "
                        f"(300kb) (default {DEFAULT_QUEUE}: docs/cluster.md)")
    u.add_argument("--subnet", default=cluster.DEFAULT_SUBNET,
                   help="IPv4 subnet of the cluster network; refused if in use here (default "
                        f"{cluster.DEFAULT_SUBNET})")
    u.add_argument("--cpus", type=int, default=None, help="CPUs each node reports to Slurm (default: this machine's)")
    for name, text in (("down", "stop and remove everything the cluster made (also after a crash)"),
                       ("status", "the cluster's shape, daemons and node states"),
                       ("env", "the client settings, as shell exports (eval \"$(ardlab cluster env)\")")):
        sub.add_parser(name, help=text)
    w = sub.add_parser("watch", help="while a run (--pid) lives, stop it if a daemon of the cluster dies")
    w.add_argument("--pid", type=int, required=True, help="the run's process (its process group gets SIGTERM)")
    sub.add_parser("cancel-jobs", help="cancel every Slurm job on the cluster (left by a run killed outright)")
    for s in sub.choices.values():
        s.add_argument("--state", type=Path, default=None,
                       help="the cluster's state folder (default $ARDLAB_CLUSTER or <repo>/.cluster)")


def run(args: argparse.Namespace) -> int:
    if args.action == "up":
        c = cluster.up(args.nodes, args.rate, state=args.state, subnet=args.subnet, cpus=args.cpus, queue=args.queue)
        print(cluster.status(Path(c.state)))
    elif args.action == "down":
        removed = cluster.down(args.state)
        print(f"removed {len(removed)}: {' '.join(removed)}" if removed else "nothing to remove")
    elif args.action == "status":
        print(cluster.status(args.state))
    elif args.action == "watch":
        lost = cluster.watch(args.pid, args.state)
        if lost:
            # said before the run is stopped: its end kills this watcher
            print(f"ardlab: error: the emulated cluster lost {', '.join(lost)} during the run, so its nodes can run "
                  "no job: stopping the run (its finished rounds are kept, the job that was running writes nothing). "
                  "workflow/run-cluster brings the cluster down; the same command brings it up again and resumes.",
                  file=sys.stderr, flush=True)
            cluster.stop_run(args.pid, args.state)
            return 3
    elif args.action == "cancel-jobs":
        ids = cluster.cancel_jobs(args.state)
        if ids:
            print(f"ardlab: cancelled {len(ids)} Slurm job(s) left by an earlier run: {' '.join(ids)}")
    else:
        c = cluster.Cluster.load((args.state or cluster.default_state()).resolve())
        if c is None:
            raise RuntimeError("no emulated cluster is up; start one with `ardlab cluster up`")
        print("\n".join(f"export {k}={shlex.quote(v)}" for k, v in c.env().items()))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ardlab.cluster", description=__doc__)
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run(args)
    except (ValueError, RuntimeError, PermissionError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
