"""`python -m ardlab.comm`: print facts from the library table for shell scripts (stdlib only)."""

import shlex
import sys

from ardlab.comm.libraries import BUILT_IN, LIBRARIES, algorithms, library


def main(argv: list[str]) -> int:
    usage = ("usage: python -m ardlab.comm (names [--built-in] | pip LIBRARY | site LIBRARY | module-exports | "
             "accepts LIBRARY | algorithms LIBRARY | tuned-env LIBRARY FILE | fabric LIBRARY)")
    if not argv:
        print(usage, file=sys.stderr)
        return 2
    try:
        if argv[0] == "names" and len(argv) == 1:  # every library: the built-in ones, then a site's
            print("\n".join(LIBRARIES))
        elif argv[0] == "names" and argv[1:] == ["--built-in"]:  # the wheels' (the images hold those)
            print("\n".join(BUILT_IN))
        elif argv[0] == "pip" and len(argv) == 2:
            print("\n".join(library(argv[1]).pip_packages))
        elif argv[0] == "site" and len(argv) == 2:
            # a site library's wrapper and launcher, checked, and its module's record: one JSON line, or an empty line
            # for none (install-env)
            import json

            from ardlab.comm.sites import installation, module_record

            site = library(argv[1]).site
            if site is not None:  # nothing for a built-in library
                record = module_record(site)
                site = installation(site, record)
                print(f"{site.mpicc}\n{site.mpiexec}\n{json.dumps(record, sort_keys=True) if record else ''}")
        elif argv[0] == "module-exports" and len(argv) == 1:  # a module record (stdin) as `export` lines, for `eval`
            import json
            import os

            from ardlab.comm.sites import apply_module

            settings = apply_module(json.load(sys.stdin), dict(os.environ))
            print("\n".join(f"export {k}={shlex.quote(v)}" for k, v in settings.items()))
        elif argv[0] == "accepts" and len(argv) == 2:  # a site library's build probed (install-env)
            from ardlab.comm import accepts

            return accepts.main(argv[1])
        elif argv[0] == "algorithms" and len(argv) == 2:
            print("\n".join(algorithms(argv[1])))
        elif argv[0] == "tuned-env" and len(argv) == 3:  # for `eval` in job scripts
            env = library(argv[1]).tuned_env(argv[2])
            print("\n".join(f"export {k}={shlex.quote(v)}" for k, v in env.items()))
        elif argv[0] == "fabric" and len(argv) == 2:  # the image's %test: every transport plugin loads
            from ardlab.comm.fabric import report
            from ardlab.comm.launch import require_env

            lost = report(argv[1], require_env(argv[1]))
            if lost:
                print(lost, file=sys.stderr)
                return 1
            print(f"{library(argv[1]).display}: every UCX transport and libfabric provider it ships loads")
        else:
            print(usage, file=sys.stderr)
            return 2
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
