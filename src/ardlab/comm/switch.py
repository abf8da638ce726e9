"""Switching the Allreduce algorithm inside a running launch, through MPI_T control variables (cvars).

A launch costs seconds (TensorFlow and Horovod take most of them), and the variants of a comparison differ only in
the algorithm. Where a library lets its forcing settings change after MPI_Init (``Library.switching`` in the table
says whether, how, and how that was proven), one launch can measure every algorithm, interleaved:

    sw = Switch("mpich")                 # after MPI_Init, in a launch started at the default (+ launch_env)
    comm = sw.to("ring")                 # the communicator whose Allreduce now runs ring
    ...
    comm = sw.to("default")
    sw.close()

The cvars are the settings that force each algorithm at launch (``Library.algorithm_env``), less the library's
prefix; ``Switching.force`` stands in for its launch-only ``force_env``. A variable the target algorithm does not
set goes back to the value it had at start-up, so every switch leaves exactly the state a launch with the
algorithm's settings would have. Values that are names are turned into the cvar's integers by its MPI_T enum, or
(MPICH, which has none) by the order of the names in its description, which the tests check against launches.
Tuned selection files are read at MPI_Init by every library: they take a launch of their own.
"""

from __future__ import annotations

import ctypes
import os
import re
from collections.abc import Mapping

from ardlab.comm.libraries import DEFAULT, forced_algorithm, library

_NAME_LEN = 256
_DESC_LEN = 8192
_ENUM_LINE = re.compile(r"^\s*(\w+)\s+- ")


def loaded_libmpi() -> ctypes.CDLL:
    """The MPI library this process has loaded (mpi4py's), for calls mpi4py does not wrap (MPI_T): libmpi.so.*, or
    MPICH's own name for it in a distribution's build (Debian's libmpich.so.12)."""
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if re.search(r"/libmpi(ch)?\.so", line)}
    if not paths:
        raise RuntimeError("no libmpi is loaded in this process: import mpi4py.MPI (which starts MPI) first")
    return ctypes.CDLL(sorted(paths)[0])


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise RuntimeError(f"{what} failed with MPI_T error code {rc}")


class _Cvar:
    """One control variable (an integer, or a string: Intel MPI's): its handle, its value at start-up, and its
    names for values."""

    def __init__(self, mpi: ctypes.CDLL, name: str):
        self.name = name
        index = ctypes.c_int()
        rc = mpi.MPI_T_cvar_get_index(name.encode(), ctypes.byref(index))
        if rc != 0:
            raise RuntimeError(f"this MPI library has no control variable {name!r} (MPI_T error {rc})")
        buf, desc = ctypes.create_string_buffer(_NAME_LEN), ctypes.create_string_buffer(_DESC_LEN)
        name_len, desc_len = ctypes.c_int(_NAME_LEN), ctypes.c_int(_DESC_LEN)
        verbosity, binding, scope = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        datatype, enum = ctypes.c_void_p(), ctypes.c_void_p()  # pointer-sized: holds either ABI's handle
        _check(mpi.MPI_T_cvar_get_info(index, buf, ctypes.byref(name_len), ctypes.byref(verbosity),
                                       ctypes.byref(datatype), ctypes.byref(enum), desc, ctypes.byref(desc_len),
                                       ctypes.byref(binding), ctypes.byref(scope)), f"MPI_T_cvar_get_info({name})")
        self.string = self._is_string(datatype.value or 0)
        self.names = self._enum_names(mpi, enum) if enum.value else self._described_names(desc.value.decode())
        self.handle, self._count = ctypes.c_void_p(), ctypes.c_int()
        _check(mpi.MPI_T_cvar_handle_alloc(index, None, ctypes.byref(self.handle), ctypes.byref(self._count)),
               f"MPI_T_cvar_handle_alloc({name})")
        if self._count.value != 1 and not self.string:
            raise RuntimeError(f"control variable {name} holds {self._count.value} values; ardlab switches single ones")
        self._mpi = mpi
        self.initial = self.read()

    def _is_string(self, datatype: int) -> bool:
        from mpi4py import MPI

        if datatype == MPI._handleof(MPI.CHAR):
            return True
        if datatype in {MPI._handleof(t) for t in (MPI.INT, MPI.UNSIGNED)}:
            return False
        raise RuntimeError(f"control variable {self.name} is neither an integer nor a string "
                           f"(MPI datatype handle {datatype:#x})")

    @staticmethod
    def _enum_names(mpi: ctypes.CDLL, enum: ctypes.c_void_p) -> dict[str, int]:
        count, buf, length = ctypes.c_int(), ctypes.create_string_buffer(_NAME_LEN), ctypes.c_int(_NAME_LEN)
        _check(mpi.MPI_T_enum_get_info(enum, ctypes.byref(count), buf, ctypes.byref(length)), "MPI_T_enum_get_info")
        names = {}
        for i in range(count.value):
            value, buf, length = ctypes.c_int(), ctypes.create_string_buffer(_NAME_LEN), ctypes.c_int(_NAME_LEN)
            _check(mpi.MPI_T_enum_get_item(enum, i, ctypes.byref(value), buf, ctypes.byref(length)),
                   "MPI_T_enum_get_item")
            names[buf.value.decode()] = value.value
        return names

    @staticmethod
    def _described_names(description: str) -> dict[str, int]:
        """MPICH's enum cvars: the values are the positions of the `name - text` lines of the description."""
        names = [m.group(1) for line in description.splitlines()[1:] if (m := _ENUM_LINE.match(line))]
        return {n: i for i, n in enumerate(names)}

    def value_of(self, text: str) -> int | str:
        if self.string:
            return text
        if re.fullmatch(r"-?\d+", text):
            return int(text)
        if text not in self.names:
            raise ValueError(f"control variable {self.name} has no value {text!r}; valid: {', '.join(self.names)}")
        return self.names[text]

    def read(self) -> int | str:
        if self.string:
            out = ctypes.create_string_buffer(self._count.value + 1)
            _check(self._mpi.MPI_T_cvar_read(self.handle, out), f"MPI_T_cvar_read({self.name})")
            return out.value.decode()
        out = ctypes.c_int()
        _check(self._mpi.MPI_T_cvar_read(self.handle, ctypes.byref(out)), f"MPI_T_cvar_read({self.name})")
        return out.value

    def write(self, value: int | str) -> None:
        if self.string:
            data = str(value).encode()
            if len(data) >= self._count.value:
                raise ValueError(f"control variable {self.name} holds at most {self._count.value - 1} characters")
            buf = ctypes.create_string_buffer(data, self._count.value)
        else:
            buf = ctypes.byref(ctypes.c_int(value))
        _check(self._mpi.MPI_T_cvar_write(self.handle, buf), f"MPI_T_cvar_write({self.name} = {value!r})")

    def free(self) -> None:
        self._mpi.MPI_T_cvar_handle_free(ctypes.byref(self.handle))


class Switch:
    """The Allreduce algorithm of one library, switched inside this process (see the module's docstring)."""

    def __init__(self, library_name: str, comm=None, environ: Mapping[str, str] | None = None):
        lib = self.library = library(library_name)
        spec = lib.switching
        if spec is None:
            raise ValueError(f"{lib.display} cannot switch its Allreduce algorithm inside a launch: "
                             f"{lib.switching_note}")
        environ = os.environ if environ is None else environ
        missing = {k: v for k, v in spec.launch_env.items() if environ.get(k) != v}
        if missing:
            raise RuntimeError(f"a launch that switches {lib.display}'s algorithm needs "
                               f"{' '.join(f'{k}={v}' for k, v in missing.items())} from the start "
                               "(ardlab.comm.launch adds it)")
        started = forced_algorithm(lib.name, environ)
        if started != DEFAULT:
            raise RuntimeError(f"this launch forces {started!r} through its settings; a launch that switches starts "
                               "at the default (its launch-time settings cannot be undone)")
        from mpi4py import MPI

        self._comm = comm if comm is not None else MPI.COMM_WORLD
        self._current_comm = self._comm
        self._mpi = loaded_libmpi()
        provided = ctypes.c_int()
        _check(self._mpi.MPI_T_init_thread(MPI.THREAD_SINGLE, ctypes.byref(provided)), "MPI_T_init_thread")
        names = set(spec.force)
        for alg in lib.algorithms.values():
            names |= {k.removeprefix(spec.cvar_prefix) for k in alg.env}
        self._cvars = {n: _Cvar(self._mpi, n) for n in sorted(names)}
        self.algorithm = DEFAULT

    def settings(self, algorithm: str) -> dict[str, int | str]:
        """The value of every switched cvar under `algorithm` (ValueError naming the valid ones)."""
        spec = self.library.switching
        env = self.library.algorithm_env(algorithm)  # ValueError for a name not in the table
        wanted = {} if algorithm == DEFAULT else {**spec.force, **{k.removeprefix(spec.cvar_prefix): v
                                                                    for k, v in env.items() if k not in
                                                                    self.library.force_env}}
        return {n: c.value_of(wanted[n]) if n in wanted else c.initial for n, c in self._cvars.items()}

    def changed(self, algorithm: str) -> dict[str, int | str]:
        """The cvars `algorithm` sets to other values than their start-up ones (what a row records as its knobs)."""
        return {n: v for n, v in self.settings(algorithm).items() if v != self._cvars[n].initial}

    def to(self, algorithm: str):
        """Make `algorithm` the one that runs; return the communicator to call Allreduce on from now on."""
        for name, value in self.settings(algorithm).items():
            self._cvars[name].write(value)
        self.algorithm = algorithm
        if self.library.switching.takes_effect == "communicator":
            self._free_dup()
            self._current_comm = self._comm.Dup()
        return self._current_comm

    def values(self) -> dict[str, int | str]:
        """What every switched cvar reads now."""
        return {n: c.read() for n, c in self._cvars.items()}

    def _free_dup(self) -> None:
        if self._current_comm is not self._comm:
            self._current_comm.Free()
            self._current_comm = self._comm

    def close(self) -> None:
        """Back to the start-up values; free the handles and MPI_T."""
        if self._mpi is None:
            return
        self._free_dup()
        for c in self._cvars.values():
            c.write(c.initial)
            c.free()
        self._mpi.MPI_T_finalize()
        self._mpi = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
