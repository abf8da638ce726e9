"""A site's own MPI installations, registered as libraries beside the three wheels (issue 54.1).

A cluster's MPI is rarely a PyPI wheel: an Open MPI built with UCX against the site's Slurm and PMIx, a vendor MPICH,
a module. A user registers it once, by family (whose forcing knobs, tuned-file format and proofs it shares: mpich,
openmpi or intelmpi) and its compiler wrapper and launcher; every command then takes its name like the wheels'. The
registrations are TOML tables, read (standard library only, like the table itself) from, in order:

- the file named by ``$ARDLAB_SITE_LIBRARIES``, if set (and then only that file);
- ``site-libraries.toml`` at the checkout's root (git-ignored: what `ardlab libraries add` writes);
- ``~/.config/ardlab/site-libraries.toml`` (``$XDG_CONFIG_HOME``; ``~`` the user's home in the password database).

One table a library, its name the table's::

    [openmpi-debian]
    family = "openmpi"                       # mpich | openmpi | intelmpi
    mpicc = "/usr/bin/mpicc.openmpi"         # the wrapper mpi4py (and Horovod) are built with
    mpiexec = "/usr/bin/mpiexec.openmpi"     # the launcher its ranks are started with
    display = "Open MPI 4.1 (Debian)"        # optional: how tables name it

`containers/install-env NAME PREFIX` builds its environment (mpi4py from source with that mpicc, the launcher linked
in as the environment's bin/mpiexec) and refuses it when the library's own version string is not of its family. A
site's build need not accept every algorithm its family's knob can name (Debian's MPICH 4.0.2 refuses `ring` at
MPI_Init; the 5.0 wheel has it): the set-up probes each one (``ardlab.comm.accepts``) and writes what the build
accepted and refused into the environment (``ACCEPTS_FILE``), which the table reads (``accepts``). What an accepted
knob really runs is for the proofs to show (`ardlab probe`), not assumed.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

FILE_NAME = "site-libraries.toml"
# What a site library's build accepted and refused of its family's algorithms, in its environment (ardlab.comm.accepts)
ACCEPTS_FILE = "ardlab-site-algorithms.json"
NAME = re.compile(r"[a-z][a-z0-9_-]*")
KEYS = {"family": True, "mpicc": True, "mpiexec": True, "display": False}  # key -> required


class SiteError(ValueError):
    """A registration that cannot be used: its file, its library and the bad value named."""


@dataclass(frozen=True)
class Site:
    """One registered installation: the family whose table entry it shares, its compiler wrapper and launcher, how
    tables name it, and the file it was registered in."""

    name: str
    family: str
    mpicc: str
    mpiexec: str
    display: str
    source: str


def repo_root() -> Path:
    """The source checkout holding this package (src layout)."""
    return Path(__file__).resolve().parents[3]


def envs_root() -> Path:
    """Where the libraries' environments live: $ARDLAB_ENVS, or the checkout's .envs."""
    base = os.environ.get("ARDLAB_ENVS")
    return Path(base) if base else repo_root() / ".envs"


def accepts(name: str) -> dict | None:
    """What the build of site library `name` accepted and refused when its environment was set up (``ACCEPTS_FILE``:
    ``accepted``, a list; ``refused`` and ``unprobed``, algorithm -> why), or None where no environment was probed
    (the table then offers the family's every algorithm). SiteError naming the file where it is not such a record."""
    path = envs_root() / name / ACCEPTS_FILE
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as e:
        raise SiteError(f"site library {name!r}: {path} is unreadable ({e}); rebuild its environment "
                        "(containers/setup-envs)") from None
    shape = {"accepted": list, "refused": dict, "unprobed": dict}
    if not isinstance(record, dict) or any(not isinstance(record.get(k), t) for k, t in shape.items()):
        raise SiteError(f"site library {name!r}: {path} is not a record of accepted, refused and unprobed algorithms; "
                        "rebuild its environment (containers/setup-envs)")
    return record


def registry_files() -> list[Path]:
    """The files registrations are read from, in order (those that need not exist included)."""
    named = os.environ.get("ARDLAB_SITE_LIBRARIES")
    if named:
        return [Path(named)]
    files = [repo_root() / FILE_NAME]
    config = os.environ.get("XDG_CONFIG_HOME")
    if not config:
        # the user's own home (the password database's), not $HOME: a process run as another user (setpriv, sudo)
        # keeps the caller's $HOME, whose files it may not even see; a uid with no entry (some containers) has none
        try:
            config = os.path.join(pwd.getpwuid(os.getuid()).pw_dir, ".config")
        except KeyError:
            return files
    return [*files, Path(config) / "ardlab" / FILE_NAME]


def parse(text: str, source: str, families: dict[str, str]) -> list[Site]:
    """The registrations of one file's text; `families` maps each family's name to its display name. SiteError names
    the file, the library and the value for anything that is not a valid registration."""
    try:
        tables = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SiteError(f"{source}: not valid TOML ({e})") from None
    out = []
    for name, fields in tables.items():
        where = f"{source}: site library {name!r}"
        if not isinstance(fields, dict):
            raise SiteError(f"{where}: expected a table ([{name}] with family, mpicc, mpiexec), got {fields!r}")
        if not NAME.fullmatch(name):
            raise SiteError(f"{where}: a name is lower-case letters, digits, '-' and '_', starting with a letter")
        if name in families:
            raise SiteError(f"{where}: the name of a built-in library; name the site's installation otherwise "
                            f"(e.g. {name}-site)")
        unknown = sorted(set(fields) - set(KEYS))
        if unknown:
            raise SiteError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(KEYS)}")
        missing = [k for k, required in KEYS.items() if required and k not in fields]
        if missing:
            raise SiteError(f"{where}: missing {', '.join(missing)}")
        bad = [k for k, v in fields.items() if not isinstance(v, str) or not v.strip()]
        if bad:
            raise SiteError(f"{where}: {', '.join(bad)} must be a non-empty string")
        if fields["family"] not in families:
            raise SiteError(f"{where}: family {fields['family']!r} is not one of {', '.join(families)}")
        for key in ("mpicc", "mpiexec"):
            if not os.path.isabs(fields[key]):
                raise SiteError(f"{where}: {key} {fields[key]!r} is not an absolute path")
        display = fields.get("display") or f"{families[fields['family']]} ({name})"
        out.append(Site(name, fields["family"], fields["mpicc"], fields["mpiexec"], display, source))
    return out


def load(families: dict[str, str], files: list[Path] | None = None) -> dict[str, Site]:
    """Every registration of the registry files (``registry_files()`` unless given); a name registered twice is
    refused, naming both files."""
    sites: dict[str, Site] = {}
    for path in registry_files() if files is None else files:
        if not path.is_file():
            continue
        for site in parse(path.read_text(), str(path), families):
            if site.name in sites:
                raise SiteError(f"site library {site.name!r} is registered twice: in {sites[site.name].source} and "
                                f"{site.source}")
            sites[site.name] = site
    return sites


def check_installation(site: Site) -> None:
    """Refuse, naming the path, an installation whose wrapper or launcher is not an executable file (what can be
    told before anything is built; the family is checked against the library's own version string when mpi4py loads
    it, by containers/install-env)."""
    for key in ("mpicc", "mpiexec"):
        path = getattr(site, key)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise SiteError(f"site library {site.name!r} ({site.source}): {key} {path} is not an executable file")


def toml_table(site: Site) -> str:
    """The registration as a TOML table (what `ardlab libraries add` appends); strings as TOML basic strings."""
    def q(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return (f"[{site.name}]\nfamily = {q(site.family)}\nmpicc = {q(site.mpicc)}\nmpiexec = {q(site.mpiexec)}\n"
            + (f"display = {q(site.display)}\n" if site.display else ""))


def add(site: Site, path: Path, families: dict[str, str]) -> Path:
    """Append the registration `site` to the registry file `path` (made if missing) after checking it: its fields
    (``parse``), its wrapper and launcher (``check_installation``), and that no registry file has its name yet."""
    parse(toml_table(site), str(path), families)
    check_installation(site)
    taken = load(families, sorted({*registry_files(), path}))
    if site.name in taken:
        raise SiteError(f"site library {site.name!r} is registered already, in {taken[site.name].source}")
    text = path.read_text() if path.is_file() else ("# A site's MPI installations (ardlab.comm.sites), written by "
                                                   "`ardlab libraries add`.\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.rstrip("\n") + "\n\n" + toml_table(site))
    return path
