"""One Apptainer definition file, read as its sections: what the proof runs is the file itself, never a copy.

spython (the field's parser of Singularity/Apptainer recipes) reads the header and the sections; the line where
each section starts is kept, so that a failing command is reported at its line of the ``.def`` file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

SECTIONS = ("files", "post", "environment", "test", "runscript")
KNOWN = ("setup", "files", "post", "environment", "test", "runscript", "startscript", "labels", "help", "arguments")
_HEADER = re.compile(r"^%(" + "|".join(KNOWN) + r"|app\w+)(?:\s+(.*?))?\s*$")


@dataclass(frozen=True)
class Section:
    name: str
    text: str
    first_line: int  # line number (1-based) in the .def of the section's first body line
    shell: str = "/bin/sh"  # what runs a script section: Apptainer's /bin/sh, or the header's `-c SHELL`

    def def_line(self, script_line: int) -> int:
        """The .def line of line `script_line` (1-based) of this section's body."""
        return self.first_line + script_line - 1


@dataclass(frozen=True)
class Definition:
    path: Path
    bootstrap: str
    base: str  # From: of a docker bootstrap, OSVersion of a debootstrap one
    sections: dict[str, Section] = field(default_factory=dict)
    header: dict[str, str] = field(default_factory=dict)

    def files(self) -> list[tuple[str, str]]:
        """The %files entries as (source on the build host, destination in the image)."""
        out = []
        for n, line in enumerate(self.section("files").text.splitlines()):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) > 2:
                raise ValueError(f"{self.path}:{self.section('files').def_line(n + 1)}: a %files entry has one "
                                 f"source and at most one destination, got {line!r}")
            out.append((parts[0], parts[-1]))
        return out

    def section(self, name: str) -> Section:
        if name not in self.sections:
            return Section(name, "", 0)
        return self.sections[name]


def read(path: str | Path) -> Definition:
    """Parse a definition: its header through spython, each section's body and first line from the text."""
    from spython.main.parse.parsers import SingularityParser

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no definition file {path}")
    stages = SingularityParser(str(path)).recipe
    if len(stages) != 1:
        raise ValueError(f"{path}: the proof runs single-stage definitions, this one has stages {list(stages)}")
    header = _header(path)
    bootstrap = header.get("bootstrap", "").lower()
    if not bootstrap:
        raise ValueError(f"{path}: no 'Bootstrap:' line in the header")
    base = header.get("from") or header.get("osversion") or ""
    return Definition(path, bootstrap, base, _sections(path), header)


def _header(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if line.startswith("%"):
            break
        if ":" in line and not line.lstrip().startswith("#"):
            key, value = line.split(":", 1)
            out[key.strip().lower()] = value.strip()
    return out


def _sections(path: Path) -> dict[str, Section]:
    lines = path.read_text().splitlines()
    starts = [(i, m.group(1)) for i, line in enumerate(lines) if (m := _HEADER.match(line))]
    out = {}
    for k, (i, name) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(lines)
        if name in out:
            raise ValueError(f"{path}:{i + 1}: section %{name} appears twice")
        args = (m.group(2) or "").split() if (m := _HEADER.match(lines[i])) else []
        shell = args[args.index("-c") + 1] if "-c" in args[:-1] else "/bin/sh"
        out[name] = Section(name, "\n".join(lines[i + 1:end]).rstrip() + "\n", i + 2, shell)
    return out
