"""python -m ardlab.sim loop ...: the timing loop of each cost family under SMPI (see ardlab.sim)."""

from __future__ import annotations

import argparse
import sys

from ardlab.sim import loop
from ardlab.sim.platform import Link


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ardlab.sim", description=__doc__)
    sub = p.add_subparsers(dest="action", required=True)
    b = sub.add_parser("build", help="build the timing loop for SMPI (cached)")
    b.set_defaults(action="build")
    r = sub.add_parser("loop", help="time the Allreduce of each family on a simulated cluster")
    r.add_argument("--families", nargs="+", default=list(loop.SIMULATED), choices=loop.SIMULATED)
    r.add_argument("--nodes", type=int, required=True)
    r.add_argument("--ranks", type=int, required=True)
    r.add_argument("--sizes", default="4,64,1K,16K,256K,1M,4M", help="bytes: list '4,1K,64M'")
    r.add_argument("--rate", default="1gbit", help="the link between nodes (tc notation)")
    r.add_argument("--latency-us", type=float, default=50.0, help="one way, between two nodes")
    r.add_argument("--loopback-rate", default="40gbit")
    r.add_argument("--loopback-latency-us", type=float, default=1.0)
    r.add_argument("--iterations", type=int, default=3)
    r.add_argument("--output", required=True, help="the CSV to write (atomically)")
    a = p.parse_args(argv)
    if a.action == "build":
        print(f"built {loop.build()}")
        return 0
    from ardlab.bench.sizes import parse_sizes
    from ardlab.results import write_csv

    link = Link(a.rate, a.latency_us, a.loopback_rate, a.loopback_latency_us)
    rows = [row for name in a.families
            for row in loop.run(name, a.nodes, a.ranks, parse_sizes(a.sizes), link, iterations=a.iterations)]
    write_csv(a.output, loop.COLUMNS, rows)
    print(f"wrote {len(rows)} rows to {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
