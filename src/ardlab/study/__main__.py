"""`python -m ardlab.study schema`: the workflow's config schema with every section filled in (the training kinds'
sections and every enum are made when the workflow loads, ardlab.study.config.schema); `python -m ardlab.study check
CONFIG...`: each config validated and checked as the Snakefile does, printed with its defaults filled in, or its
error."""

from __future__ import annotations

import argparse
import sys

import yaml

from ardlab.study import config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ardlab.study", description=__doc__.split(";")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("schema", help="print the config schema, every section filled in (YAML)")
    check = sub.add_parser("check", help="validate configs as the workflow does; print each with its defaults")
    check.add_argument("configs", nargs="+", metavar="CONFIG")
    args = parser.parse_args(argv)
    if args.command == "schema":
        yaml.safe_dump(config.schema(), sys.stdout, sort_keys=False, width=120)
        return 0
    from snakemake.exceptions import WorkflowError  # what Snakemake's schema validation raises

    failed = 0
    for path in args.configs:
        try:
            filled = config.load(path)
        except (OSError, ValueError, WorkflowError) as e:
            print(f"{path}: {e}", file=sys.stderr)
            failed += 1
            continue
        print(f"# {path}")
        yaml.safe_dump(filled, sys.stdout, sort_keys=False, width=120)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
