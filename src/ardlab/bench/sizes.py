"""Message sizes: parse lists and ranges ('4,1K,64M', '4:64M' in powers of two, '1K:1M:x4') and format them."""

from __future__ import annotations

import re

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20,
          "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([A-Za-z]*)\s*$")

DEFAULT_SIZES = "4:64M"


def parse_size(text: str) -> int:
    """'64K' -> 65536 (binary units); ValueError naming the text otherwise."""
    m = _SIZE_RE.match(text)
    unit = m.group(2).upper() if m else None
    if not m or unit not in _UNITS:
        raise ValueError(f"cannot parse message size {text!r}: use bytes with an optional K, M or G suffix")
    return int(m.group(1)) * _UNITS[unit]


def parse_sizes(text: str) -> list[int]:
    """A comma list of sizes and ranges 'LO:HI[:xF]' (geometric, factor F, default 2), sorted, unique."""
    out: set[int] = set()
    if not text or not text.strip():
        raise ValueError("empty message-size list")
    for part in text.split(","):
        if ":" in part:
            pieces = part.split(":")
            if len(pieces) not in (2, 3):
                raise ValueError(f"cannot parse size range {part!r}: use LO:HI or LO:HI:xF")
            lo, hi = parse_size(pieces[0]), parse_size(pieces[1])
            factor = 2
            if len(pieces) == 3:
                m = re.fullmatch(r"\s*x(\d+)\s*", pieces[2])
                if not m or int(m.group(1)) < 2:
                    raise ValueError(f"cannot parse range step {pieces[2]!r} in {part!r}: use xF with F >= 2")
                factor = int(m.group(1))
            if lo < 1 or hi < lo:
                raise ValueError(f"size range {part!r} must have 1 <= LO <= HI")
            s = lo
            while s <= hi:
                out.add(s)
                s *= factor
        else:
            out.add(parse_size(part))
    return sorted(out)


def format_size(n: float) -> str:
    """Bytes in the units the parser reads: 4, 1K, 1.5M, 1G."""
    for unit, f in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= f:
            return f"{n / f:g}{unit}"
    return f"{n:g}"
