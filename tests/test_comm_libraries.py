"""The library/algorithm table: complete, self-consistent, and errors that name the bad value."""

import pytest

from ardlab.comm import DEFAULT, LIBRARIES, OWN_ALGORITHMS, algorithm, detect, library, run_env
from ardlab.comm.ranks import pof2_floor


def test_every_library_has_its_default_and_its_tuned_file_writer():
    from ardlab.analysis.tuned import WRITERS

    assert {"mpich", "openmpi", "intelmpi"} <= set(LIBRARIES)
    for lib in LIBRARIES.values():
        assert lib.tuned_writer in WRITERS and lib.algorithm_var
        assert DEFAULT in lib.algorithms
        assert lib.algorithm_env(DEFAULT) == {}
        for name, alg in lib.algorithms.items():
            assert alg.name == name and alg.implementation == "native"
            if name != DEFAULT:
                env = lib.algorithm_env(name)
                assert alg.env and set(alg.env) <= set(env) and set(lib.force_env) <= set(env)


def test_documented_algorithms_listed():
    assert {"recursive_doubling", "recursive_multiplying", "reduce_scatter_allgather", "tree", "recexch", "ring",
            "k_reduce_scatter_allgather", "nb", "smp", "ccl"} <= set(LIBRARIES["mpich"].algorithms)
    ompi = {a.env.get("OMPI_MCA_coll_tuned_allreduce_algorithm") for a in LIBRARIES["openmpi"].algorithms.values()}
    assert {"1", "2", "3", "4", "5", "6"} <= ompi
    impi = {a.env.get("I_MPI_ADJUST_ALLREDUCE") for a in LIBRARIES["intelmpi"].algorithms.values()}
    assert {str(i) for i in range(1, 13)} <= impi


def test_knob_values_are_unique_per_library():
    for lib in LIBRARIES.values():
        envs = [tuple(sorted(a.env.items())) for a in lib.algorithms.values()]
        assert len(envs) == len(set(envs)), lib.name


def test_detect():
    assert detect("MPICH Version:      5.0.2\nMPICH Release date: ...")[0].name == "mpich"
    lib, version = detect("Open MPI v5.0.11, package: Open MPI ...")
    assert (lib.name, version) == ("openmpi", "5.0.11")
    assert detect("Intel(R) MPI Library 2021.18 for Linux* OS\n")[0].name == "intelmpi"
    with pytest.raises(ValueError, match="not in ardlab's table: 'MVAPICH2'"):
        detect("MVAPICH2")


def test_unknown_names_are_named_with_choices():
    with pytest.raises(ValueError, match=r"unknown MPI library 'mvapich'; valid: mpich, openmpi, intelmpi"):
        library("mvapich")
    with pytest.raises(ValueError, match=r"unknown Allreduce algorithm 'bogus' for Open MPI; valid: default, "):
        algorithm("openmpi", "bogus")
    with pytest.raises(ValueError, match="ranks must be >= 1, got 0"):
        library("mpich").launcher("/x", 0)


def test_constraints():
    rsag = LIBRARIES["mpich"].algorithms["reduce_scatter_allgather"]
    rsag.check(ranks=6, count=4)
    with pytest.raises(ValueError, match=r"count >= largest power of two <= ranks \(= 4 at 6 ranks\); got count=3"):
        rsag.check(ranks=6, count=3)
    with pytest.raises(ValueError, match="needs a commutative operation"):
        LIBRARIES["mpich"].algorithms["ring"].check(ranks=2, commutative=False)
    with pytest.raises(ValueError, match="needs several nodes"):
        LIBRARIES["mpich"].algorithms["smp"].check(ranks=2, nodes=1)
    assert [pof2_floor(n) for n in (1, 2, 3, 4, 5, 8, 9)] == [1, 2, 2, 4, 4, 8, 8]


def test_run_env():
    assert run_env("openmpi", "ring")["OMPI_MCA_coll_tuned_allreduce_algorithm"] == "4"
    assert run_env("openmpi", "ring")["OMPI_MCA_coll"] == "^han"
    assert "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM" not in run_env("mpich", "own_ring")
    assert run_env("intelmpi", DEFAULT) == {"I_MPI_PIN": "0"}
    assert {"own_ring", "own_recursive_doubling", "own_rabenseifner", "own_binomial"} <= set(OWN_ALGORITHMS)


def test_every_library_says_how_its_ranks_start_under_slurm(monkeypatch):
    """Each library starts by srun or by its own hydra, and says why where not srun: hydra inside the allocation it
    runs in, or outside one inside an allocation salloc makes for the launch; with a site's own PMI plugin asked
    for, srun starts the ranks."""
    from ardlab.comm import launch
    for lib in LIBRARIES.values():
        assert lib.slurm_start in ("srun", "hydra"), lib.name
        assert lib.slurm_start == "srun" or lib.slurm_start_why, lib.name
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    argv, _ = launch.allocation_command("mpich", 5, 2, ["python"])
    mpiexec = str(launch.env_prefix("mpich") / "bin" / "mpiexec")
    assert argv == ["salloc", "--quiet", "-N", "2", "-n", "5", mpiexec, "-launcher", "slurm", "-rmk", "slurm",
                    "-n", "5", "-ppn", "3", "python"]
    monkeypatch.setenv("ARDLAB_ENVS", "/nonexistent")  # no environment is needed to build an srun command
    argv, _ = launch.allocation_command("mpich", 4, 2, ["python"], srun_mpi="pmi2")
    assert argv[:3] == ["srun", "--mpi=pmi2", "--kill-on-bad-exit=1"]
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    argv, _ = launch.allocation_command("mpich", 4, 2, ["python"], srun_mpi="pmix")
    assert argv[:2] == ["srun", "--mpi=pmix"]
    assert launch.allocation_command("openmpi", 4, 2, ["python"])[0][0] == "srun"


def test_every_setting_a_library_forces_or_tunes_with_is_recorded_in_the_rows():
    """A library's forcing and tuning settings start with one of its own knob_prefixes (a library that forgot them
    would have its settings silently left out of the rows' `knobs` column); none is a runtime path."""
    from ardlab.comm.libraries import LIBRARIES, knobs_in_force, runtime_path_settings

    for lib in LIBRARIES.values():
        names = {*lib.force_env, *lib.tuning_env, *(k for a in lib.algorithms.values() for k in a.env)}
        assert names, lib.name
        for name in names:
            assert name.startswith(lib.knob_prefixes), (lib.name, name)
            assert name not in runtime_path_settings()
        assert all(k in knobs_in_force(dict.fromkeys(names, "1")) for k in names)


def test_each_librarys_soname_is_the_file_its_environment_holds():
    """The table's soname (what a tuned-file writer reads the built-in selection from) is in the environment's lib/."""
    from ardlab.comm.launch import require_env
    from ardlab.comm.libraries import LIBRARIES

    for lib in LIBRARIES.values():
        assert (require_env(lib.name) / "lib" / lib.soname).is_file(), lib.name
