"""`python -m ardlab.experiments [NAME [ARGS...]]`: the investigations, each named once (``EXPERIMENTS``); without a
name, the list of them and the question each answers."""

from __future__ import annotations

import importlib
import sys

from ardlab.experiments import EXPERIMENTS


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help", "list"):
        print("usage: python -m ardlab.experiments NAME [ARGS...]  (NAME --help: its options)\n")
        for name, question in EXPERIMENTS.items():
            print(f"  {name:16s} {question}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in EXPERIMENTS:
        print(f"error: unknown investigation {name!r}; valid: {', '.join(EXPERIMENTS)}", file=sys.stderr)
        return 2
    sys.argv[0] = f"python -m ardlab.experiments {name}"  # what argparse names in its usage
    return importlib.import_module(f"ardlab.experiments.{name}").main(rest) or 0


if __name__ == "__main__":
    sys.exit(main())
