"""`python -m ardlab.comm`: print facts from the library table for shell scripts (stdlib only)."""

import sys

from ardlab.comm.libraries import LIBRARIES, algorithms, library


def main(argv: list[str]) -> int:
    usage = "usage: python -m ardlab.comm (names | pip LIBRARY | algorithms LIBRARY)"
    if not argv:
        print(usage, file=sys.stderr)
        return 2
    try:
        if argv[0] == "names" and len(argv) == 1:
            print("\n".join(LIBRARIES))
        elif argv[0] == "pip" and len(argv) == 2:
            print("\n".join(library(argv[1]).pip_packages))
        elif argv[0] == "algorithms" and len(argv) == 2:
            print("\n".join(algorithms(argv[1])))
        else:
            print(usage, file=sys.stderr)
            return 2
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0




if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
