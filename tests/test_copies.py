"""The pages' marked copies of committed tables (ardlab.analysis.copies): the repository's own pages agree with their
files, and `ardlab report --copies` rewrites a stale copy, leaves the rest of the page as it was, and refuses a marker
it cannot follow, naming it, before writing anything."""

from __future__ import annotations

import pytest

from ardlab.analysis import copies
from conftest import ROOT, ardlab

TABLE = "| a | b |\n|---|---|\n| 1 | 2 |\n"


def test_the_repositorys_pages_show_their_files_tables():
    pages = copies.pages(ROOT)
    assert copies.stale(pages, ROOT) == []
    marked = {(c.page.relative_to(ROOT).as_posix(), c.source) for p in pages for c in copies.copies(p)}
    assert {("README.md", "results/study/tables/study_headline_short.md"),
            ("docs/study.md", "results/study/tables/study_headline.md")} <= marked


def page_with_copy(tmp_path, body: str = "| a | b |\n|---|---|\n| 0 | 0 |\n| 9 | 9 |\n"):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "x.md").write_text("# made by a command\n\n" + TABLE + "\nafter\n")
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "p.md"
    page.write_text(f"Intro: <!-- copy: t/x.md -->\n\n{body}\nText after the table.\n")
    return page


def test_refresh_rewrites_a_stale_copy_and_nothing_else(tmp_path):
    page = page_with_copy(tmp_path)
    assert copies.stale([page], tmp_path) == [f"{page} line 3: its copy of t/x.md differs from the file"]
    assert copies.refresh([page], tmp_path) == [page]
    assert page.read_text() == f"Intro: <!-- copy: t/x.md -->\n\n{TABLE}\nText after the table.\n"
    assert copies.stale([page], tmp_path) == []
    assert copies.refresh([page], tmp_path) == []  # nothing to change: nothing written


def test_refresh_only_the_named_sources(tmp_path):
    page = page_with_copy(tmp_path)
    before = page.read_text()
    assert copies.refresh([page], tmp_path, {"t/other.md"}) == []
    assert page.read_text() == before


@pytest.mark.parametrize("text, words", [
    ("Intro: <!-- copy: t/x.md -->\nA line, then\n| a |\n",
     "line 1: the copy marker of t/x.md is not followed by a table"),
    ("Intro: <!-- copy: t/missing.md -->\n\n| a |\n", "names t/missing.md, which is not a file"),
    ("Intro: <!-- copy: t/plain.md -->\n\n| a |\n", "names t/plain.md, which holds no markdown table"),
])
def test_a_bad_marker_is_refused_naming_it_and_nothing_is_written(tmp_path, text, words):
    good = page_with_copy(tmp_path)
    (tmp_path / "t" / "plain.md").write_text("no table here\n")
    bad = tmp_path / "README.md"
    bad.write_text(text)
    before = good.read_text()
    with pytest.raises(copies.CopyError, match=words):
        copies.refresh(copies.pages(tmp_path), tmp_path)
    assert good.read_text() == before


def test_the_cli_refreshes_the_pages_of_the_folder_it_runs_in(tmp_path):
    page = page_with_copy(tmp_path)
    run = ardlab("report", "--copies", cwd=tmp_path)
    assert run.stdout.split() == [str(page)]
    assert TABLE in page.read_text()


def test_a_marker_quoted_as_code_is_not_a_marker(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("A copy is marked `<!-- copy: t/x.md -->`, the first table after it its copy.\n\nText.\n")
    assert copies.copies(page) == []
