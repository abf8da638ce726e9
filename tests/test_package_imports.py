"""The package's dependencies run one way: every module imports only its own package or the layers below it,
and no group of modules imports itself round in a cycle (function-level imports included).

The layer order is written once, here, from the leaf (result I/O) to the command line.
"""

import ast
import re
from pathlib import Path

import ardlab

SRC = Path(ardlab.__file__).resolve().parent
LAYERS = [
    "ardlab.results",  # column lists, atomic writes, tables: imports nothing of ardlab
    "ardlab.stats",  # medians, paired bootstrap intervals and verdicts (analysis and benchmark scripts alike)
    "ardlab.comm",  # the library/algorithm table, launching, our own Allreduce algorithms
    "ardlab.cluster",  # the emulated multi-node Slurm cluster (namespaces, daemons)
    "ardlab.images",  # the Apptainer definitions proven in fresh Debian roots, ranks inside them under srun
    "ardlab.rounds",  # the seeded order of each round of a comparison
    "ardlab.programs",  # the measuring programs, each named once (their modules loaded only when asked)
    "ardlab.plan",  # the run plan from driver to ranks
    "ardlab.driver",  # starts the ranks of a plan
    "ardlab.bench",  # the microbenchmark, message sizes, the timing loop, the call counter (no training)
    "ardlab.sim",  # the simulated cluster: the timing loop under SimGrid's SMPI
    "ardlab.nn",  # the CNN framework (oneDNN or NumPy kernels, data parallel over MPI)
    "ardlab.horovod",  # TensorFlow + Horovod (translates ardlab.nn models)
    "ardlab.callcount",  # a training run's Allreduce calls counted (plans and runs the trainings)
    "ardlab.analysis",  # tables, tuned files, cost models, figures
    "ardlab.advise",  # `ardlab advise`: one job's calls raced within a budget, the choice checked in training
    "ardlab.experiments",  # investigations: benchmark scripts answering one question each
    "ardlab.study",  # the workflow's config, matrix and job commands
    "ardlab.rank",  # what each launched rank runs
    "ardlab.cli",  # the command line
]


def test_the_layout_doc_lists_the_layers_in_this_order():
    """docs/layout.md's "Dependencies run one way" sentence names the layers of LAYERS, in order."""
    text = " ".join((Path(__file__).parents[1] / "docs" / "layout.md").read_text().split())
    sentence = text[text.index("Dependencies run one way, in this order:"):].split(";")[0]
    named = re.findall(r"`(\w+)`", sentence)
    assert named == [layer.removeprefix("ardlab.") for layer in LAYERS], named


def module_name(path: Path) -> str:
    parts = ["ardlab", *path.relative_to(SRC).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in SRC.rglob("*.py")}


def imports(name: str) -> set[str]:
    """The ardlab modules `name` imports, anywhere in its code."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("ardlab")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            if not base.startswith("ardlab"):
                continue
            for a in node.names:  # `from pkg import submodule` imports the submodule
                out.add(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base)
    return {m for m in out if m != name and m != "ardlab"}


def layer(name: str) -> int:
    for i, prefix in enumerate(LAYERS):
        if name == prefix or name.startswith(prefix + "."):
            return i
    raise AssertionError(f"module {name} is in no layer of {LAYERS}: add it to the list")


def test_every_module_has_a_layer():
    for name in MODULES:
        if name != "ardlab":
            layer(name)


def test_no_module_imports_upward():
    upward = [f"{name} imports {target}" for name in MODULES if name != "ardlab"
              for target in sorted(imports(name)) if layer(target) > layer(name)]
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_no_import_cycles():
    graph = {name: imports(name) for name in MODULES}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles = []

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(path[path.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_the_checker_sees_function_level_imports():
    # ardlab.cli imports the driver only inside its handlers: the walk must still see it.
    assert "ardlab.driver" in imports("ardlab.cli")
