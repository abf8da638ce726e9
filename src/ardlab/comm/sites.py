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

or by the environment module that puts it on PATH (Environment Modules or Lmod, as the site's users load it)::

    [mpich-site]
    family = "mpich"
    module = "mpich/4.0"                     # loaded for the set-up and for every launch
    mpicc = "mpicc"                          # optional with a module: a bare name is found on the module's PATH

A module is loaded once, when the environment is set up (``module_environment``): a module that does not load stops
the set-up, naming it; what it changed (PATH and the other folder lists it put folders in front of, the variables it
set) is recorded in the environment (``MODULE_FILE``) and given to every launch of the library (``module_settings``).
Variables a module removes stay in a launch's environment.

`containers/install-env NAME PREFIX` builds its environment (mpi4py from source with that mpicc, the launcher linked
in as the environment's bin/mpiexec) and refuses it when the library's own version string is not of its family. A
site's build need not accept every algorithm its family's knob can name (Debian's MPICH 4.0.2 refuses `ring` at
MPI_Init; the 5.0 wheel has it): the set-up probes each one (``ardlab.comm.accepts``) and writes what the build
accepted and refused into the environment (``ACCEPTS_FILE``), which the table reads (``accepts``). What an accepted
knob really runs is for the proofs to show (`ardlab probe`), not assumed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

FILE_NAME = "site-libraries.toml"
# What a site library's build accepted and refused of its family's algorithms, in its environment (ardlab.comm.accepts)
ACCEPTS_FILE = "ardlab-site-algorithms.json"
# What loading a site library's module changed (module_environment), in its environment, for its launches
MODULE_FILE = "ardlab-site-module.json"
NAME = re.compile(r"[a-z][a-z0-9_-]*")
KEYS = {"family": True, "mpicc": True, "mpiexec": True, "display": False, "module": False}  # key -> required
# What a registration with a module may leave out: bare names, found on the module's PATH
MODULE_DEFAULTS = {"mpicc": "mpicc", "mpiexec": "mpiexec"}
MODULE_TIMEOUT_S = 60
# Where the `module` command's bash definition is, when the caller's shell did not hand it down: the module system's
# own variables first (Environment Modules and Lmod both set MODULESHOME), then the places Debian's packages put them
MODULE_INITS = ("${MODULESHOME:+$MODULESHOME/init/bash}", "${LMOD_PKG:+$LMOD_PKG/init/bash}",
                "/usr/share/modules/init/bash", "/usr/share/lmod/lmod/init/bash", "/etc/profile.d/lmod.sh")


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
    module: str = ""


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


def describe(site: Site) -> str:
    """How a registration names its installation, for `ardlab info` and `ardlab libraries list`."""
    return (f"module {site.module}, " if site.module else "") + f"mpicc {site.mpicc}, mpiexec {site.mpiexec}"


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
        if "module" in fields:
            fields = {**MODULE_DEFAULTS, **fields}
        missing = [k for k, required in KEYS.items() if required and k not in fields]
        if missing:
            raise SiteError(f"{where}: missing {', '.join(missing)}")
        bad = [k for k, v in fields.items() if not isinstance(v, str) or not v.strip()]
        if bad:
            raise SiteError(f"{where}: {', '.join(bad)} must be a non-empty string")
        if fields["family"] not in families:
            raise SiteError(f"{where}: family {fields['family']!r} is not one of {', '.join(families)}")
        for key in ("mpicc", "mpiexec"):
            bare = "/" not in fields[key]
            if not os.path.isabs(fields[key]) and not (bare and "module" in fields):
                raise SiteError(f"{where}: {key} {fields[key]!r} is not an absolute path"
                                + ("" if "module" in fields else " (a bare name is found on a module's PATH: "
                                   "register the module that provides it)"))
        display = fields.get("display") or f"{families[fields['family']]} ({name})"
        out.append(Site(name, fields["family"], fields["mpicc"], fields["mpiexec"], display, source,
                        fields.get("module", "")))
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


def module_environment(module: str, site: str = "") -> dict[str, dict[str, str]]:
    """What `module load MODULE` changes, loaded in a bash of its own with the module system the caller's shell
    handed down or the system's (``MODULE_INITS``): ``prepend`` and ``append`` (a folder list's folders put in front
    of or behind the value it had) and ``set`` (any other variable's new value), the module systems' own
    bookkeeping (names starting with ``_``) and exported shell functions left out. SiteError naming the module (and
    `site`, the library it is registered for) where there is no module command or the module does not load."""
    where = f"site library {site!r}: " if site else ""
    inits = " ".join(f'"{i}"' for i in MODULE_INITS)
    script = f"""type module >/dev/null 2>&1 || for init in {inits}; do
  [ -n "$init" ] && [ -r "$init" ] && . "$init" >/dev/null 2>&1 && type module >/dev/null 2>&1 && break
done
type module >/dev/null 2>&1 || exit 4
env -0 > "$2"
module load "$1" || exit 3
env -0 > "$3"
"""
    with tempfile.TemporaryDirectory(prefix="ardlab-module-") as tmp:
        before, after = Path(tmp) / "before", Path(tmp) / "after"
        try:
            proc = subprocess.run(["bash", "--noprofile", "--norc", "-c", script, "bash", module, str(before),
                                   str(after)], capture_output=True, text=True, timeout=MODULE_TIMEOUT_S,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise SiteError(f"{where}module {module!r} did not load within {MODULE_TIMEOUT_S} s") from None
        said = " ".join(proc.stderr.split())[-600:]
        if proc.returncode == 4:
            raise SiteError(f"{where}module {module!r}: no `module` command (Environment Modules or Lmod) in the "
                            "caller's shell or at " + ", ".join(i for i in MODULE_INITS if i.startswith("/")))
        if proc.returncode != 0 or not after.is_file():
            raise SiteError(f"{where}module {module!r} does not load (`module load {module}` exit status "
                            f"{proc.returncode}): {said or 'no message'}")
        old, new = (dict(e.split("=", 1) for e in f.read_text().split("\0") if "=" in e) for f in (before, after))
    loaded = new.get("LOADEDMODULES", "").split(":")
    if not any(m == module or m.startswith(module + "/") for m in loaded):
        raise SiteError(f"{where}module {module!r} does not load: `module load {module}` succeeded but loaded "
                        f"{new.get('LOADEDMODULES') or 'nothing'} ({said or 'no message'})")
    out: dict[str, dict[str, str]] = {"prepend": {}, "append": {}, "set": {}}
    for name, value in sorted(new.items()):
        if name.startswith(("_", "BASH_FUNC_")) or old.get(name) == value:
            continue
        was = old.get(name, "")
        if name.endswith("PATH") and was and value.endswith(os.pathsep + was):
            out["prepend"][name] = value[: -len(os.pathsep + was)]
        elif name.endswith("PATH") and was and value.startswith(was + os.pathsep):
            out["append"][name] = value[len(was + os.pathsep):]
        else:
            out["set"][name] = value
    return out


def module_record(site: Site) -> dict | None:
    """The module `site` is registered with and what loading it changes (``module_environment``), as the set-up
    records it (``MODULE_FILE``); None for a site registered by paths."""
    if not site.module:
        return None
    return {"module": site.module, **module_environment(site.module, site.name)}


def apply_module(record: dict, env: dict[str, str]) -> dict[str, str]:
    """The settings a module `record` makes over the environment `env`: its folders in front of and behind each
    folder list's value there, its other variables set."""
    out = dict(record["set"])
    for name, folders in record["prepend"].items():
        out[name] = folders + (os.pathsep + env[name] if env.get(name) else "")
    for name, folders in record["append"].items():
        out[name] = (env[name] + os.pathsep if env.get(name) else "") + folders
    return out


def module_settings(name: str) -> dict[str, str]:
    """The settings a launch of site library `name` gets from its module, over the caller's environment: what its
    set-up recorded (``MODULE_FILE``); none where it has no module or its environment was not set up yet."""
    path = envs_root() / name / MODULE_FILE
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError) as e:
        raise SiteError(f"site library {name!r}: {path} is unreadable ({e}); rebuild its environment "
                        "(containers/setup-envs)") from None
    if not isinstance(record, dict) or any(not isinstance(record.get(k), dict) for k in ("prepend", "append", "set")):
        raise SiteError(f"site library {name!r}: {path} is not a module record; rebuild its environment "
                        "(containers/setup-envs)")
    return apply_module(record, dict(os.environ))


def installation(site: Site, record: dict | None = None) -> Site:
    """`site` with its wrapper and launcher as absolute paths (a bare name found on its module's PATH: `record`, or
    the module loaded now), refused, naming the path, where one is not an executable file (what can be told before
    anything is built; the family is checked against the library's own version string when mpi4py loads it, by
    containers/install-env)."""
    found = {}
    for key in ("mpicc", "mpiexec"):
        path = getattr(site, key)
        if "/" not in path:
            record = record or module_record(site)
            search = apply_module(record, dict(os.environ)).get("PATH", os.environ.get("PATH", ""))
            hit = shutil.which(path, path=search)
            if hit is None:
                raise SiteError(f"site library {site.name!r} ({site.source}): {key} {path!r} is not on the PATH of "
                                f"module {site.module!r} ({search})")
            path = os.path.abspath(hit)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise SiteError(f"site library {site.name!r} ({site.source}): {key} {path} is not an executable file")
        found[key] = path
    return dataclasses.replace(site, **found)


def check_installation(site: Site) -> None:
    """Refuse, naming it, a registration whose module does not load or whose wrapper or launcher is not an executable
    file (``installation``)."""
    installation(site)


def toml_table(site: Site) -> str:
    """The registration as a TOML table (what `ardlab libraries add` appends); strings as TOML basic strings."""
    def q(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return (f"[{site.name}]\nfamily = {q(site.family)}\n" + (f"module = {q(site.module)}\n" if site.module else "")
            + f"mpicc = {q(site.mpicc)}\nmpiexec = {q(site.mpiexec)}\n"
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
