"""The README is a front page made from the repository: its table is the committed table file as `ardlab report`
wrote it, its figure and links exist, and it stays within two screens of text (issue 42)."""

import re

from conftest import ROOT

README = (ROOT / "README.md").read_text()


def test_the_headline_table_is_the_committed_file():
    table = (ROOT / "results" / "study" / "tables" / "study_headline_short.md").read_text().strip()
    assert table in README


def test_every_local_link_and_figure_exists():
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    assert targets
    missing = [t for t in targets if not t.startswith("http") and not (ROOT / t).exists()]
    assert not missing, missing


def test_the_front_page_is_two_screens():
    """At most 110 lines (two screens of a 120-column terminal, table rows counted once)."""
    assert len(README.splitlines()) <= 110


def test_the_advise_example_is_a_committed_answer():
    """The README's `ardlab advise` output is the table of a committed answer (results/advise/<run>/answer.md)."""
    named = re.findall(r"`(results/advise/[\w.-]+/answer\.md)`", README)
    assert named, "the README names no committed advise answer"
    for path in named:
        table = [line for line in (ROOT / path).read_text().splitlines() if line.startswith("|")]
        assert table and "\n".join(table) in README, path
