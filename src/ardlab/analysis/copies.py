"""The pages' copies of committed tables. A page (README.md, docs/*.md) that shows a table made by a command marks it
with an HTML comment, invisible when rendered, at the end of the line before it::

    ... the study's claims: <!-- copy: results/study/tables/study_headline_short.md -->

    | claim ... |
    |---|...

The copy is the first table after the marker (blank lines between allowed, nothing else): the first table of the named
file, a path from the repository root. ``refresh`` rewrites every marked copy of the given pages from its file (what
`ardlab report --regimes` does after writing its tables, and `ardlab report --copies` on its own); ``stale`` lists the
copies that differ from their file (what the tests check), so that no page shows a number its committed table does not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MARK = re.compile(r"(?<!`)<!-- copy: (?P<path>\S+) -->(?!`)")  # not one quoted in code (`...`)


class CopyError(ValueError):
    """A marker that names no file, names a file without a table, or is followed by something other than a table."""


@dataclass(frozen=True)
class Copy:
    """One marked copy: the page, the file it copies, and where its table lies in the page (line indices, end
    exclusive)."""

    page: Path
    source: str
    start: int
    end: int


def table_lines(lines: list[str], start: int = 0) -> tuple[int, int] | None:
    """(first, end) of the first markdown table (a run of lines starting with '|') at or after `start`, or None."""
    first = next((i for i in range(start, len(lines)) if lines[i].startswith("|")), None)
    if first is None:
        return None
    end = next((i for i in range(first, len(lines)) if not lines[i].startswith("|")), len(lines))
    return first, end


def source_table(root: Path, source: str, page: Path) -> list[str]:
    """The first table of `source` (a path under `root`), as lines; CopyError naming the page when there is none."""
    path = root / source
    if not path.is_file():
        raise CopyError(f"{page}: its copy marker names {source}, which is not a file under {root}")
    lines = path.read_text().splitlines()
    span = table_lines(lines)
    if span is None:
        raise CopyError(f"{page}: its copy marker names {source}, which holds no markdown table")
    return lines[span[0]:span[1]]


def copies(page: Path) -> list[Copy]:
    """Every marked copy of `page`, in page order; CopyError where a marker is not followed by a table."""
    lines = page.read_text().splitlines()
    found = []
    for i, line in enumerate(lines):
        for m in MARK.finditer(line):
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            if j == len(lines) or not lines[j].startswith("|"):
                raise CopyError(f"{page} line {i + 1}: the copy marker of {m['path']} is not followed by a table "
                                f"(blank lines, then lines starting with '|')")
            found.append(Copy(page, m["path"], j, table_lines(lines, j)[1]))
    return found


def stale(pages: list[Path], root: Path) -> list[str]:
    """One line per marked copy that differs from its file's first table: the page, its line and the file."""
    out = []
    for page in pages:
        lines = page.read_text().splitlines()
        for c in copies(page):
            if lines[c.start:c.end] != source_table(root, c.source, page):
                out.append(f"{page} line {c.start + 1}: its copy of {c.source} differs from the file")
    return out


def refresh(pages: list[Path], root: Path, sources: set[str] | None = None) -> list[Path]:
    """Rewrite every marked copy in `pages` (only those of `sources`, when given, as paths under `root`) from its
    file; returns the pages that changed. Every marker is read before any page is written, so a bad marker changes
    nothing."""
    planned = []
    for page in pages:
        lines = page.read_text().splitlines()
        new = list(lines)
        for c in reversed(copies(page)):
            if sources is None or c.source in sources:
                new[c.start:c.end] = source_table(root, c.source, page)
        if new != lines:
            planned.append((page, new))
    for page, new in planned:
        page.write_text("\n".join(new) + "\n")
    return [page for page, _ in planned]


def pages(root: Path) -> list[Path]:
    """The pages that may hold copies: the README and docs/*.md under `root`, those that exist."""
    return [p for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))] if p.is_file()]
