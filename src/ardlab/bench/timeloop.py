"""The compiled timing loop (timeloop.c): building it in an environment, and timing native Allreduce calls with it.

The microbenchmark times a library's own Allreduce with this loop by default (rows say ``timer=c``), as OSU and
IMB do: the timed region holds the MPI call alone. Our own algorithms stay timed in Python (``timer=python``):
their Python per-call cost is part of what they are. ``--timer python`` times native calls in Python too (the
loop ardlab used before), to measure what the interpreter adds.

    python -m ardlab.bench.timeloop build      # (re)build it for this environment's MPI (containers/install-env)
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
from pathlib import Path

SOURCE = Path(__file__).with_name("timeloop.c")
LIBRARY_FILE = "libardlab_timeloop.so"
# c: compiled, a barrier before each timed call (OSU's method, ardlab's default); c-loop: compiled, one barrier and
# the calls back to back, the span divided by their number (IMB-MPI1's method); python: the Python loop, OSU's method.
TIMERS = ("c", "c-loop", "python")
COMPILED = ("c", "c-loop")
# The C symbol; its arguments, in order, as ctypes types.
_FUNCTION = "ardlab_time_allreduce"
_ARGTYPES = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
             ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)

_loaded: dict[tuple[str, str], object] = {}  # (library file, function) -> the loaded function


def library_path(prefix: str | Path | None = None) -> Path:
    """Where an environment (default: this interpreter's) keeps the built loop."""
    return Path(prefix or sys.prefix) / "lib" / LIBRARY_FILE


def build(prefix: str | Path | None = None) -> Path:
    """Compile timeloop.c against the MPI of the environment at `prefix` (default: this interpreter's)."""
    return compile_against(SOURCE, LIBRARY_FILE, prefix, "the timing loop")


def compile_against(source: Path, name: str, prefix: str | Path | None, what: str, mpi: bool = True) -> Path:
    """Compile `source` into <prefix>/lib/<name> against the MPI of the environment at `prefix` (its include/ and
    lib/libmpi): gcc with those paths for every library alike, since the Intel MPI wheel's mpicc wrapper is broken
    (it holds a literal I_MPI_SUBSTITUTE_INSTALLDIR). Written under a temporary name and renamed, so a failed build
    leaves nothing. With `mpi` false, a plain shared library (pthreads) for any environment."""
    from ardlab.comm.libraries import SITE_MARKER

    prefix = Path(prefix or sys.prefix).resolve()
    out = prefix / "lib" / name
    tmp = out.with_name(out.name + ".tmp")
    if mpi and (prefix / SITE_MARKER).is_file():
        # A site's MPI (ardlab.comm.sites): its own wrapper knows its include and library paths.
        cmd = [str(prefix / "bin" / "mpicc"), "-O2", "-std=c11", "-Wall", "-Werror", "-shared", "-fPIC", str(source),
               "-o", str(tmp)]
    else:
        compiler = shutil.which("gcc") or shutil.which("cc")
        if compiler is None:
            raise RuntimeError(f"no C compiler (gcc) to build {what}; install it (Debian: apt-get install gcc)")
        if mpi and not (prefix / "include" / "mpi.h").is_file():
            raise FileNotFoundError(f"no mpi.h under {prefix / 'include'}: not an environment with an MPI library")
        links = [f"-L{prefix / 'lib'}", "-lmpi", f"-Wl,-rpath,{prefix / 'lib'}"] if mpi else ["-lpthread"]
        cmd = [compiler, "-O2", "-std=c11", "-Wall", "-Werror", "-shared", "-fPIC", f"-I{prefix / 'include'}",
               str(source), *links, "-o", str(tmp)]
    out.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"building {what} failed: {' '.join(cmd)}\n{proc.stderr}")
    tmp.replace(out)
    return out


def load_built(library_file: str, function: str, argtypes, restype, what: str, module: str, hint: str = ""):
    """`function` of the library `library_file` that this interpreter's environment built at set-up (loaded once),
    its argument and result types set; FileNotFoundError saying how to build it where it is missing."""
    key = (library_file, function)
    if key not in _loaded:
        path = library_path().with_name(library_file)
        if not path.is_file():
            raise FileNotFoundError(f"{what} {path} is missing: set up the environment again (containers/setup-envs), "
                                    f"or build it with `{sys.executable} -m {module} build`{hint}")
        fn = getattr(ctypes.CDLL(str(path)), function)
        fn.argtypes, fn.restype = argtypes, restype
        _loaded[key] = fn
    return _loaded[key]


def _function():
    return load_built(LIBRARY_FILE, _FUNCTION, _ARGTYPES, ctypes.c_int, "the compiled timing loop",
                      "ardlab.bench.timeloop", "; `--timer python` measures without it")


def time_allreduce(comm, x, y, op, *, warmup: int, iterations: int, expected=None, back_to_back: bool = False):
    """Seconds of each of `iterations` timed calls of comm.Allreduce(x, y, op) (numpy arrays of one dtype), after
    `warmup` untimed ones, every timed call after a barrier (`back_to_back`: IMB's way, one barrier and the span of
    all calls shared out); with `expected`, y is checked after every call (after the span) outside the timed region,
    and a mismatch raises RuntimeError naming the call and the first element."""
    import numpy as np
    from mpi4py import MPI

    datatype = MPI._typedict[x.dtype.char]
    seconds = np.zeros(iterations)
    check = expected.ctypes.data if expected is not None else None
    rc = _function()(
        MPI._addressof(comm), x.ctypes.data, y.ctypes.data, x.size, MPI._addressof(datatype), MPI._addressof(op),
        warmup, iterations, seconds.ctypes.data, check, y.nbytes, int(back_to_back))
    if rc < 0:
        bad = int(np.flatnonzero(y != expected)[0])
        raise RuntimeError(f"validation failed in timed call {-rc}: element {bad} is {y[bad]!r}, "
                           f"expected {expected[bad]!r}")
    if rc != 0:
        raise RuntimeError(f"MPI_Allreduce or MPI_Barrier returned error code {rc} in the timing loop")
    return seconds


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m ardlab.bench.timeloop", description=__doc__.splitlines()[0])
    p.add_argument("action", choices=["build"])
    p.add_argument("--prefix", default=None, help="the environment (default: this interpreter's)")
    args = p.parse_args(argv)
    try:
        print(f"built {build(args.prefix)}")
    except (RuntimeError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
