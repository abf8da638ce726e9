"""Variants that share a launch (``Comparison.switch_in_launch``): the driver's grouping, the rows such a launch
writes, and proof by the library's own behaviour that each phase of a switched *training* launch ran the algorithm
its row names (gdb breakpoints for Open MPI, MPICH's fallback messages).

The switch itself is proven on bare Allreduce calls in tests/test_comm_switch.py; these tests prove it where the
study uses it: inside ardlab.nn and TensorFlow + Horovod training launches.
"""

import csv
import dataclasses

import pytest

from ardlab import driver
from ardlab.comm import library
from ardlab.comm.probe import probe, probe_switched
from ardlab.horovod import train as horovod_train
from ardlab.nn import trainer
from ardlab.plan import Comparison, RunPlan
from ardlab.results import TRAIN_COLUMNS

NN = {"model": "simplecnn", "dataset": "digits", "batch_per_rank": 8, "steps": 3, "evaluate": False, "lr": 0.01,
      "backend": "numpy"}
TF = {"model": "simplecnn", "dataset": "digits", "batch_per_rank": 8, "warmup_batches": 1, "batches_per_iter": 1,
      "iterations": 2}


def _nn(lib, algorithm="default", **kw):
    return trainer.plan(lib, ranks=2, algorithm=algorithm, options=NN, threads=1, **kw)


def test_a_library_that_switches_shares_one_launch_in_round_order():
    plans = [_nn("mpich"), _nn("intelmpi"), _nn("mpich", "ring"), _nn("openmpi", "ring"), _nn("intelmpi", "ring"),
             _nn("mpich", tuned="x.json"), _nn("openmpi"), _nn("mpich", "own_ring")]
    order = [2, 1, 3, 5, 0, 7, 6, 4]
    got = [(p.label, p.switch, p.switch_positions, pos) for p, pos in driver.launches(plans, order, share=True)]
    assert got == [
        ("mpich/ring+default", ["ring", "default"], [0, 4], [0, 4]),  # at the first of them, in the round's order
        ("intelmpi/default", [], [], [1]),  # Intel MPI cannot switch: a launch each
        ("openmpi/ring+default", ["ring", "default"], [2, 6], [2, 6]),
        ("mpich/tuned", [], [], [3]),  # a tuned file is read at MPI_Init
        ("mpich/own_ring", [], [], [5]),  # ours: a launch of its own
        ("intelmpi/ring", [], [], [7]),
    ]
    assert [p.position for p, _ in driver.launches(plans, order, share=True)] == [0, 1, 2, 3, 5, 7]
    alone = driver.launches(plans, order, share=False)
    assert [(p.label, pos) for p, pos in alone] == [(plans[i].label, [k]) for k, i in enumerate(order)]


def test_only_alike_variants_share():
    """Variants of one library that differ in more than the algorithm (another thread count) keep apart."""
    plans = [_nn("mpich"), _nn("mpich", "ring"), dataclasses.replace(_nn("mpich", "recursive_doubling"), threads=2)]
    got = [(p.label, pos) for p, pos in driver.launches(plans, [0, 1, 2], share=True)]
    assert got == [("mpich/default+ring", [0, 1]), ("mpich/recursive_doubling", [2])]


@pytest.mark.parametrize("change, message", [
    (dict(library="intelmpi"), "Intel MPI cannot switch inside a launch"),
    (dict(program="microbench"), "the microbenchmark measures one forced algorithm a launch"),
    (dict(algorithm="ring"), "starts at the default"),
    (dict(switch=["ring", "warp"]), "warp"),
    (dict(switch=["ring", "own_ring"]), "'own_ring' is not a native algorithm"),
    (dict(switch_positions=[0]), "1 positions for 2 algorithms"),
])
def test_bad_switched_plans_are_named(change, message):
    base = dict(program="train", library="mpich", ranks=2, switch=["ring", "default"], switch_positions=[0, 1])
    with pytest.raises(ValueError, match=message):
        RunPlan(**{**base, **change})


def test_the_microbenchmark_does_not_switch():
    from ardlab.bench import allreduce

    with pytest.raises(ValueError, match="switching inside a launch is for training"):
        Comparison("g", [allreduce.plan("mpich", ranks=2, sizes=[8], algorithms=["ring"])], switch_in_launch=True)


def test_switched_rows_per_variant(tmp_path):
    """A comparison of every library's default and ring, ardlab.nn training: MPICH's and Open MPI's two variants
    each share a launch, Intel MPI's take one each; every variant gets its row, its own position, its label, and
    the cvars written in its knobs."""
    libs = ["mpich", "openmpi", "intelmpi"]
    out = tmp_path / "rows.csv"
    c = Comparison("nn", [_nn(lib, alg) for lib in libs for alg in ("default", "ring")], rounds=2, seed=3,
                   output=str(out), progress=False, switch_in_launch=True)
    rows = driver.run_comparison(c)
    with open(out, newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == TRAIN_COLUMNS
        assert list(reader) == rows
    assert len(rows) == 12
    for r in (0, 1):
        mine = [x for x in rows if x["round"] == str(r)]
        assert sorted(int(x["position"]) for x in mine) == list(range(6))
        assert {(x["library"], x["algorithm"]) for x in mine} == {(lib, a) for lib in libs for a in ("default", "ring")}
    for x in rows:
        assert x["launch_variants"] == ("1" if x["library"] == "intelmpi" else "2")
        assert float(x["img_per_s"]) > 0
        cvar = {"mpich": "MPI_T:MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=",
                "openmpi": "MPI_T:coll_tuned_allreduce_algorithm="}
        if x["library"] in cvar:
            assert (cvar[x["library"]] in x["knobs"]) == (x["algorithm"] == "ring"), x["knobs"]
    assert "OMPI_MCA_coll_tuned_use_dynamic_rules=1" in next(x["knobs"] for x in rows if x["library"] == "openmpi")


def _switched_program(tmp_path, plan: RunPlan, names: list[str]) -> list[str]:
    plan = dataclasses.replace(plan, switch=names, switch_positions=list(range(len(names))), progress=False)
    path = plan.save(tmp_path / "plan.json")
    return ["-m", "ardlab.rank", "--plan", str(path)]


def _plain_program(tmp_path, plan: RunPlan, name: str) -> list[str]:
    path = dataclasses.replace(plan, algorithm=name, progress=False).save(tmp_path / f"plain-{name}.json")
    return ["-m", "ardlab.rank", "--plan", str(path)]


def _as_launched(tmp_path, lib: str, plan: RunPlan, names: list[str], exact: bool = True) -> None:
    """Each phase of one switched launch of `plan` hits the algorithm functions a launch of `plan` with that
    algorithm's settings hits: exactly as often (ardlab.nn: the same training makes the same calls), or, not
    `exact`, the same functions (Horovod's calls vary in number from launch to launch)."""
    phases = probe_switched(lib, names, program=_switched_program(tmp_path, plan, names), timeout=900)
    launched = {n: probe(lib, n, ranks=plan.ranks, program=_plain_program(tmp_path, plan, n), timeout=900)
                for n in set(names)}
    for name, hits in zip(names, phases):
        if exact:
            assert hits == launched[name], name
        assert set(hits) == set(launched[name]), (name, hits, launched[name])
        if name != "default":
            assert set(hits) == {library(lib).algorithms[name].symbol} and hits.total() >= 3 * plan.ranks, hits


def test_switched_nn_training_runs_each_algorithm_openmpi(tmp_path):
    """gdb breakpoints on Open MPI's algorithm functions, per phase of one ardlab.nn training launch."""
    _as_launched(tmp_path, "openmpi", _nn("openmpi"), ["default", "ring", "recursive_doubling", "ring"])


@pytest.mark.slow
def test_switched_horovod_training_runs_each_algorithm_openmpi(tmp_path):
    """The same inside one TensorFlow + Horovod launch: Horovod restarted on each switched communicator. Horovod's
    background thread makes its calls as tensors become ready: their number varies from launch to launch (6 to 8
    of one function seen), the functions they reach do not."""
    plan = horovod_train.plan("openmpi", ranks=2, options=TF, threads=1, knobs={"cache_capacity": 0})
    _as_launched(tmp_path, "openmpi", plan, ["ring", "default", "recursive_doubling"], exact=False)


@pytest.mark.slow
def test_switched_horovod_training_runs_each_algorithm_mpich(tmp_path):
    """MPICH (stripped: no symbols) prints a fallback message for every call of an algorithm that cannot apply:
    'smp' on one node. Only the smp phases of one Horovod launch print them."""
    names = ["default", "smp", "default", "smp"]
    plan = horovod_train.plan("mpich", ranks=2, options=TF, threads=1, knobs={"cache_capacity": 0})
    phases = probe_switched("mpich", names, program=_switched_program(tmp_path, plan, names), timeout=900)
    assert [bool(p) for p in phases] == [False, True, False, True], phases
    assert all(p["fallback:smp"] >= 3 for p in phases[1::2]), phases
