"""Every repository path a page names exists (issue 55: stale pointers): the paths in backticks of README.md, docs/
and results/README.md that start at the repository's root (src/, docs/, tests/, results/, workflow/, containers/,
examples/, .ci/), and in results/README.md those under results/ (runs/, study/, advise/, experiments/); and every
section a page, docstring or config names by its title (`docs/usage.md, "Algorithm table"`, or `"The cluster study"
([docs/cluster.md](...))`) is a heading or a bold paragraph title of that page."""

import re
from pathlib import Path

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


# A section named by its page: `docs/x.md, "Title"` (also README), or `"Title" ([docs/x.md](...))`.
PAGE_THEN_TITLE = re.compile(r'\b((?:docs/[\w-]+\.md)|README(?:\.md)?),?\s+"([^"]+)"')
TITLE_THEN_PAGE = re.compile(r'"([^"]+)"\s+\(\[[^]]*\]\(((?:\.\./)?(?:docs/)?[\w-]+\.md)\)')


def _titles(page: Path) -> list[str]:
    """A page's headings and bold paragraph titles, as written."""
    text = page.read_text()
    return ([line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]
            + re.findall(r"^\*\*([^*]+)\*\*", text, flags=re.M))


def _sources() -> list[Path]:
    return [ROOT / "README.md", ROOT / "results" / "README.md", *sorted((ROOT / "docs").glob("*.md")),
            *sorted((ROOT / "src").rglob("*.py")), *sorted((ROOT / "workflow" / "config").rglob("*.yaml"))]


def _named_sections():
    for source in _sources():
        text = " ".join(source.read_text().replace("#", " ").split()) if source.suffix != ".md" else \
            " ".join(source.read_text().split())
        for m in PAGE_THEN_TITLE.finditer(text):
            page = "README.md" if m.group(1).startswith("README") else m.group(1)
            yield source, page, m.group(2)
        for m in TITLE_THEN_PAGE.finditer(text):
            # a link's target is relative to the page it is in
            yield source, (source.parent / m.group(2)).resolve().relative_to(ROOT).as_posix(), m.group(1)


def test_every_section_a_page_names_exists():
    named = list(_named_sections())
    assert any(page == "docs/usage.md" and title == "Algorithm table" for _, page, title in named)  # the test reads
    missing = []
    for source, page, title in named:
        if not (ROOT / page).is_file():
            missing.append((source.relative_to(ROOT).as_posix(), page, title, "no such page"))
        elif not any(t.startswith(title) for t in _titles(ROOT / page)):
            missing.append((source.relative_to(ROOT).as_posix(), page, title))
    assert not missing, missing
