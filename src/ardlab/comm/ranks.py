"""Rank arithmetic shared by the table's constraints (``libraries``) and our own algorithms (``own``)."""

from __future__ import annotations


def pof2_floor(n: int) -> int:
    """Largest power of two <= n (n >= 1)."""
    return 1 << (max(n, 1).bit_length() - 1)
