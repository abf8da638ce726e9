"""Every repository path a page names exists (issue 55: stale pointers): the paths in backticks of README.md, docs/
and results/README.md that start at the repository's root (src/, docs/, tests/, results/, workflow/, containers/,
examples/, .ci/), and in results/README.md those under results/ (runs/, study/, advise/, experiments/)."""

import re

from conftest import ROOT

ROOTS = ("src/", "docs/", "tests/", "results/", "workflow/", "containers/", "examples/", ".ci/")
UNDER_RESULTS = ("runs/", "study/", "advise/", "experiments/")
# Named on purpose though not in the repository: another project's source file, and what the main job writes.
ELSEWHERE = {"src/plugins/mpi/pmi2/pmi1.c": "Slurm's source", "results/runs/local/": "the main job's output",
             "results/runs/local/tables/reproduce_summary.md": "the main job's output"}


def _named(page, prefixes):
    text = (ROOT / page).read_text()
    for m in re.finditer(r"`([^`\s]+)`", text):
        token = m.group(1).rstrip(".,:;)").split("::")[0].split("#")[0]
        if token.startswith(prefixes) and not any(c in token for c in "*<>{}$[]"):
            yield text[:m.start()].count("\n") + 1, token


def test_every_path_a_page_names_exists():
    pages = ["README.md", "results/README.md", *(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]
    missing = [(page, line, token) for page in pages for line, token in _named(page, ROOTS)
               if token not in ELSEWHERE and not (ROOT / token).exists()]
    missing += [("results/README.md", line, token) for line, token in _named("results/README.md", UNDER_RESULTS)
                if not (ROOT / "results" / token).exists()]
    assert not missing, missing


def test_the_investigations_list_names_every_one():
    """ardlab.experiments' docstring lists every investigation module it holds."""
    import ardlab.experiments as experiments

    modules = {p.stem for p in (ROOT / "src/ardlab/experiments").glob("*.py") if p.stem != "__init__"}
    missing = [m for m in sorted(modules) if f"``{m}``" not in experiments.__doc__]
    assert not missing, missing
