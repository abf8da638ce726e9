"""Benchmark scripts' results as tidy tables: a CSV (one row a measurement) and the same as Markdown, side by side.

Standard library only, so the library environments (which have no pandas) can write them; both files are
written atomically.
"""

from __future__ import annotations

import csv
from pathlib import Path

from ardlab.atomic import atomic_open


def _cell(v) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def write(rows: list[dict], path: str | Path) -> list[Path]:
    """Write rows (same keys, in order) to `path` (.csv) and the same table to `path` with suffix .md."""
    path = Path(path).with_suffix(".csv")
    cols = list(rows[0])
    with atomic_open(path, newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    md = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    md += ["| " + " | ".join(_cell(r[c]) for c in cols) + " |" for r in rows]
    with atomic_open(path.with_suffix(".md")) as f:
        f.write("\n".join(md) + "\n")
    return [path, path.with_suffix(".md")]
