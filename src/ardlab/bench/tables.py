"""Benchmark scripts' results as tidy tables: a CSV (one row a measurement) and the same as Markdown, side by side.

Standard library only, so the library environments (which have no pandas) can write them; both files are
written atomically. ``markdown`` is also the renderer of ``ardlab report``'s tables.
"""

from __future__ import annotations

import csv
from pathlib import Path

from ardlab.atomic import atomic_open


def markdown(columns, rows) -> str:
    """A Markdown table of rows (sequences of values in column order); floats with 3 significant digits."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def write(rows: list[dict], path: str | Path) -> list[Path]:
    """Write rows (same keys, in order) to `path` (.csv) and the same table to `path` with suffix .md."""
    path = Path(path).with_suffix(".csv")
    cols = list(rows[0])
    with atomic_open(path, newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    with atomic_open(path.with_suffix(".md")) as f:
        f.write(markdown(cols, ([r[c] for c in cols] for r in rows)))
    return [path, path.with_suffix(".md")]
