"""The measuring programs' registry (ardlab.programs): each named once, each offering the same interface, and no
code outside the registry branching on a program's name."""

import ast
from pathlib import Path

import pytest

from ardlab import programs, results
from ardlab.plan import RunPlan

SRC = Path(__file__).resolve().parents[1] / "src" / "ardlab"


def test_each_program_is_named_as_its_rows_folder():
    """A program the workflow measures is named as the kind and raw folder its rows go to (results.ROW_FILES), and
    its rows there are of its class; the three built in are all measured so (a new one may run from the command line
    and the driver before the workflow has a kind of it: tests/test_extending.py)."""
    measured = [name for name in programs.PROGRAMS if name in results.ROW_FILES]
    assert {"microbench", "train", "horovod"} <= set(measured)
    for name in measured:
        assert results.ROW_FILES[name][1] == programs.PROGRAMS[name].rows, name


@pytest.mark.parametrize("name", list(programs.PROGRAMS))
def test_each_program_offers_the_interface(name):
    p = programs.program(name)
    code = p.code()
    for hook in ("plan", "on_rank") + (("steps_run", "ask_steps", "call_setting", "job_plan") if p.trains else ()):
        assert callable(getattr(code, hook, None)), f"{p.module} lacks {hook}()"
    assert p.columns() == (results.TRAIN_COLUMNS if p.trains else results.BENCH_COLUMNS)
    assert set(p.shown) <= set(p.columns())


def test_an_unknown_program_is_named():
    with pytest.raises(ValueError, match=f"unknown program 'bench'; valid: {', '.join(programs.PROGRAMS)}$"):
        RunPlan("bench", "mpich", 2)
    with pytest.raises(ValueError, match=f"unknown framework 'torch'; valid: {', '.join(programs.FRAMEWORKS)}$"):
        programs.of_framework("torch")


def test_a_variant_carries_its_algorithm_in_its_algorithm_field():
    """The microbenchmark also reads it from its options; a label needs no program's own rule."""
    from ardlab.bench import allreduce
    from ardlab.nn import trainer

    bench = allreduce.plan("mpich", ranks=2, sizes=[8], algorithms=["ring", "recursive_doubling"])
    ring = bench.variant("ring")
    assert (ring.algorithm, ring.options["algorithms"], ring.label) == ("ring", ["ring"], "mpich/ring")
    assert allreduce.plan("mpich", ranks=2, sizes=[8], algorithms=["ring"]).algorithm == "ring"
    train = trainer.plan("mpich", ranks=2, options={"model": "simplecnn", "steps": 2}).variant("ring")
    assert (train.algorithm, train.label, "algorithms" in train.options) == ("ring", "mpich/ring", False)


NAMES = ("program", "kind", "framework")  # what names a program, a workflow kind or a training's framework


def _name_branches(tree: ast.AST) -> list[int]:
    """Lines comparing something named program/kind/framework (an attribute or a variable) with a string literal."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        named = any(isinstance(s, ast.Attribute) and s.attr in NAMES or isinstance(s, ast.Name) and s.id in NAMES
                    for s in sides)
        literal = any(isinstance(s, ast.Constant) and isinstance(s.value, str) for s in sides) or any(
            isinstance(s, (ast.Tuple, ast.List, ast.Set)) and all(isinstance(e, ast.Constant) for e in s.elts)
            for s in sides)
        if named and literal:
            out.append(node.lineno)
    return out


def test_no_code_branches_on_a_programs_name():
    """What differs between programs is a field of their record, not an `if plan.program == "..."` elsewhere; what
    differs between the workflow's kinds a field of theirs (ardlab.study.kinds.Kind), between frameworks their
    program's. (The investigations, ardlab.experiments, read rows of their own.)"""
    found = {}
    for path in SRC.rglob("*.py"):
        if path.name == "programs.py" or "experiments" in path.parts:
            continue
        lines = _name_branches(ast.parse(path.read_text()))
        if lines:
            found[str(path.relative_to(SRC))] = lines
    assert not found, found


@pytest.mark.parametrize("name", [n for n, p in programs.PROGRAMS.items() if p.trains])
def test_asking_a_training_for_steps_runs_that_many_and_one_more(name):
    """ask_steps(n) asks for n timed steps after one untimed one; steps_run counts all n + 1 (the call counter's
    divisor: every call the run made, per step it ran)."""
    code = programs.program(name).code()
    assert code.steps_run(code.ask_steps(7)) == 8
