"""A site's MPI registered as a library (ardlab.comm.sites, issue 54.1): registrations parsed and refused by name,
a name registered twice refused naming both files, `ardlab libraries add` writing a registration every command then
knows, and a rank of a site's environment reporting the site's library (its family checked against the version
string). The installations here are this machine's executables (a registration checks only that they run); a real
site MPI is built and run by the tests of containers/setup-debian-mpi's libraries."""

from __future__ import annotations

import os
import sys

import pytest

from ardlab.comm import sites
from ardlab.comm.libraries import BUILT_IN, FAMILIES, LIBRARIES, SITE_MARKER, detect, site_library
from conftest import ardlab

GOOD = '[ompi-site]\nfamily = "openmpi"\nmpicc = "/usr/bin/env"\nmpiexec = "/usr/bin/env"\n'
OMPI_VERSION = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022"


def test_a_registration_is_its_familys_entry_under_its_own_name():
    (site,) = sites.parse(GOOD, "f.toml", FAMILIES)
    lib = site_library(site)
    assert (lib.name, lib.family, lib.display, lib.pip_packages) == ("ompi-site", "openmpi", "Open MPI (ompi-site)", ())
    assert lib.algorithms == BUILT_IN["openmpi"].algorithms and lib.force_env == BUILT_IN["openmpi"].force_env
    assert all(b.family == b.name and b.site is None for b in BUILT_IN.values())


@pytest.mark.parametrize("text, words", [
    ("[ompi-site\n", "f.toml: not valid TOML"),
    ('ompi-site = "x"\n', "expected a table"),
    (GOOD.replace("ompi-site", "Ompi"), "'Ompi': a name is lower-case"),
    (GOOD.replace("ompi-site", "openmpi"), "the name of a built-in library"),
    (GOOD.replace('family = "openmpi"', 'family = "lam"'), "family 'lam' is not one of mpich, openmpi, intelmpi"),
    (GOOD.replace('mpicc = "/usr/bin/env"\n', ""), "missing mpicc"),
    (GOOD + 'modules = "x"\n', "unknown key(s) modules"),
    (GOOD.replace('mpiexec = "/usr/bin/env"', 'mpiexec = "bin/mpiexec"'), "mpiexec 'bin/mpiexec' is not an absolute"),
    (GOOD.replace('mpiexec = "/usr/bin/env"', 'mpiexec = "mpiexec"'), "a bare name is found on a module's PATH"),
    (GOOD + 'module = "mpi/x"\nmpicxx = "mpicxx"\n', "unknown key(s) mpicxx"),
    (GOOD.replace('mpiexec = "/usr/bin/env"', "mpiexec = 3"), "mpiexec must be a non-empty string"),
])
def test_a_bad_registration_is_refused_naming_it(text, words):
    with pytest.raises(sites.SiteError, match=words.replace("(", r"\(").replace(")", r"\)")):
        sites.parse(text, "f.toml", FAMILIES)


def test_a_name_registered_twice_is_refused_naming_both_files(tmp_path):
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text(GOOD)
    b.write_text(GOOD)
    with pytest.raises(sites.SiteError, match=f"registered twice: in {a} and {b}"):
        sites.load(FAMILIES, [a, b])
    assert list(sites.load(FAMILIES, [a, tmp_path / "missing.toml"])) == ["ompi-site"]


def test_an_installation_that_is_not_executable_is_refused_naming_it(tmp_path):
    plain = tmp_path / "mpicc"
    plain.write_text("")
    (site,) = sites.parse(GOOD.replace('mpicc = "/usr/bin/env"', f'mpicc = "{plain}"'), "f.toml", FAMILIES)
    with pytest.raises(sites.SiteError, match=f"mpicc {plain} is not an executable file"):
        sites.check_installation(site)


def test_a_sites_environment_reports_the_sites_library(tmp_path, monkeypatch):
    assert detect(OMPI_VERSION, tmp_path)[0] is BUILT_IN["openmpi"]  # no marker: the family
    (tmp_path / SITE_MARKER).write_text("no-such-library\n")
    with pytest.raises(ValueError, match="built for site library 'no-such-library', which is not registered"):
        detect(OMPI_VERSION, tmp_path)
    (site,) = sites.parse(GOOD, "f.toml", FAMILIES)
    monkeypatch.setitem(LIBRARIES, "ompi-site", site_library(site))
    (tmp_path / SITE_MARKER).write_text("ompi-site\n")
    lib, version = detect(OMPI_VERSION, tmp_path)
    assert (lib.name, version) == ("ompi-site", "4.1.4")
    with pytest.raises(ValueError, match="registered as family 'openmpi' .* but its MPI says it is MPICH"):
        detect("MPICH Version:      4.0.2\nMPICH Release date: ...", tmp_path)


def test_libraries_add_registers_what_every_command_then_knows(tmp_path):
    registry = tmp_path / "site-libraries.toml"
    env = {**os.environ, "ARDLAB_SITE_LIBRARIES": str(registry)}
    add = ["libraries", "add", "mpich-site", "--family", "mpich", "--mpicc", sys.executable, "--mpiexec",
           sys.executable]
    assert "registered mpich-site" in ardlab(*add, env=env).stdout
    assert 'family = "mpich"' in registry.read_text()
    listed = ardlab("libraries", "list", env=env).stdout
    assert "mpich-site" in listed and f"mpicc {sys.executable}" in listed
    assert "mpich-site" in ardlab("info", env=env).stdout
    again = ardlab(*add, env=env, check=False)
    assert again.returncode == 2 and "'mpich-site' is registered already" in again.stderr
    bad = ardlab("libraries", "add", "x-site", "--family", "lam", "--mpicc", sys.executable, "--mpiexec",
                 sys.executable, env=env, check=False)
    assert bad.returncode == 2 and "family 'lam' is not one of" in bad.stderr


def _module(folder, name: str, body: str) -> None:
    """A modulefile `name` (Environment Modules' Tcl) under the module folder `folder`."""
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("#%Module1.0\n" + body)


def test_a_module_is_loaded_and_what_it_changed_recorded(tmp_path, monkeypatch):
    # real `module load`s (Environment Modules, which containers/setup-debian-mpi installs) of modulefiles made here
    bin_dir = tmp_path / "opt" / "bin"
    _module(tmp_path / "modules", "site-mpi/1.0", f"prepend-path PATH {bin_dir}\nappend-path MANPATH /opt/man\n"
            "setenv SITE_MPI_HOME /opt\n")
    monkeypatch.setenv("MODULEPATH", str(tmp_path / "modules"))
    monkeypatch.setenv("MANPATH", "/usr/man")
    record = sites.module_environment("site-mpi/1.0")
    assert record["prepend"] == {"PATH": str(bin_dir)} and record["append"] == {"MANPATH": "/opt/man"}
    assert record["set"]["SITE_MPI_HOME"] == "/opt" and record["set"]["LOADEDMODULES"] == "site-mpi/1.0"
    assert not [k for k in record["set"] if k.startswith("_")]  # the module system's own bookkeeping left out
    # over another environment: its folders in front of and behind that environment's lists
    applied = sites.apply_module(record, {"PATH": "/bin", "MANPATH": ""})
    assert applied["PATH"] == f"{bin_dir}:/bin" and applied["MANPATH"] == "/opt/man"
    assert sites.module_environment("site-mpi")["set"]["LOADEDMODULES"] == "site-mpi/1.0"  # its default version
    with pytest.raises(sites.SiteError, match="site library 'x': module 'nosuch/2.0' does not load .*Unable to "
                                              "locate a modulefile for 'nosuch/2.0'"):
        sites.module_environment("nosuch/2.0", "x")
    _module(tmp_path / "modules", "broken/1.0", "this-is-no-command\n")
    with pytest.raises(sites.SiteError, match="module 'broken/1.0' does not load"):
        sites.module_environment("broken/1.0")


def test_libraries_add_by_module_finds_the_tools_on_its_path(tmp_path, monkeypatch):
    bin_dir = tmp_path / "opt" / "bin"
    bin_dir.mkdir(parents=True)
    for tool in ("mpicc", "mpiexec"):
        (bin_dir / tool).symlink_to(sys.executable)
    _module(tmp_path / "modules", "site-mpi/1.0", f"prepend-path PATH {bin_dir}\n")
    registry = tmp_path / "site-libraries.toml"
    monkeypatch.setenv("MODULEPATH", str(tmp_path / "modules"))
    env = {**os.environ, "ARDLAB_SITE_LIBRARIES": str(registry)}
    out = ardlab("libraries", "add", "mpich-site", "--family", "mpich", "--module", "site-mpi/1.0", env=env).stdout
    assert "registered mpich-site" in out
    assert 'module = "site-mpi/1.0"\nmpicc = "mpicc"\nmpiexec = "mpiexec"' in registry.read_text()
    assert "module site-mpi/1.0, mpicc mpicc, mpiexec mpiexec" in ardlab("libraries", "list", env=env).stdout
    (site,) = sites.load(FAMILIES, [registry]).values()
    assert sites.installation(site, sites.module_environment("site-mpi/1.0")).mpiexec == str(bin_dir / "mpiexec")
    # refused before anything is written, naming it: a module that does not load, a tool not on its PATH
    bad = ardlab("libraries", "add", "x-site", "--family", "mpich", "--module", "nosuch/1.0", env=env, check=False)
    assert bad.returncode == 2 and "module 'nosuch/1.0' does not load" in bad.stderr, bad.stderr
    bad = ardlab("libraries", "add", "y-site", "--family", "mpich", "--module", "site-mpi/1.0", "--mpicc", "mpicc.x",
                 env=env, check=False)
    assert bad.returncode == 2 and "mpicc 'mpicc.x' is not on the PATH of module 'site-mpi/1.0'" in bad.stderr
    assert "x-site" not in registry.read_text() and "y-site" not in registry.read_text()


def test_a_launch_of_a_module_library_gets_what_its_module_set(tmp_path, monkeypatch):
    import json

    from ardlab.comm.libraries import run_env

    monkeypatch.setenv("ARDLAB_ENVS", str(tmp_path))
    monkeypatch.setenv("PATH", "/usr/bin")
    (tmp_path / "mpich-site").mkdir()
    record = {"module": "site-mpi/1.0", "prepend": {"PATH": "/opt/bin"}, "append": {}, "set": {"X_HOME": "/opt"}}
    (tmp_path / "mpich-site" / sites.MODULE_FILE).write_text(json.dumps(record))
    (site,) = sites.parse('[mpich-site]\nfamily = "mpich"\nmodule = "site-mpi/1.0"\n', "f.toml", FAMILIES)
    monkeypatch.setitem(LIBRARIES, "mpich-site", site_library(site))
    env = run_env("mpich-site", "default")
    assert env["PATH"] == "/opt/bin:/usr/bin" and env["X_HOME"] == "/opt"
    (tmp_path / "mpich-site" / sites.MODULE_FILE).write_text("{}")
    with pytest.raises(sites.SiteError, match="is not a module record; rebuild its environment"):
        run_env("mpich-site", "default")


def _probed(tmp_path, monkeypatch, record) -> "object":
    """ompi-site's table entry with `record` as what its environment's probe wrote (under a throwaway ARDLAB_ENVS)."""
    import json

    monkeypatch.setenv("ARDLAB_ENVS", str(tmp_path))
    (tmp_path / "ompi-site").mkdir()
    (tmp_path / "ompi-site" / sites.ACCEPTS_FILE).write_text(record if isinstance(record, str) else json.dumps(record))
    (site,) = sites.parse(GOOD, "f.toml", FAMILIES)
    return site_library(site)


def test_what_a_sites_build_refused_is_left_out_and_named(tmp_path, monkeypatch):
    """The set-up's probe (ardlab.comm.accepts) found the build refusing one of its family's algorithms: the table
    leaves it out, and asking for it names what the library said."""
    from ardlab.comm.libraries import algorithm, algorithms

    why = "Invalid MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM value (ring)"
    lib = _probed(tmp_path, monkeypatch, {"accepted": ["basic_linear"], "refused": {"ring": why}, "unprobed": {}})
    assert "ring" not in lib.algorithms and lib.refused == {"ring": why}
    assert set(lib.algorithms) == set(BUILT_IN["openmpi"].algorithms) - {"ring"}
    monkeypatch.setitem(LIBRARIES, "ompi-site", lib)
    assert "ring" not in algorithms("ompi-site")
    with pytest.raises(ValueError, match=r"does not accept Allreduce algorithm 'ring'.*\(Invalid MPIR_CVAR"):
        algorithm("ompi-site", "ring")
    (tmp_path / "sites.toml").write_text(GOOD)
    listed = ardlab("libraries", "list", env={**os.environ, "ARDLAB_SITE_LIBRARIES": str(tmp_path / "sites.toml")})
    assert f"refuses ring: {why}" in listed.stdout


@pytest.mark.parametrize("record, words", [
    ("{not json", "unreadable"),
    ('{"accepted": "ring", "refused": {}, "unprobed": {}}', "not a record of accepted, refused and unprobed"),
])
def test_a_broken_probe_record_is_refused_naming_its_file(tmp_path, monkeypatch, record, words):
    with pytest.raises(sites.SiteError, match=f"ompi-site.*{sites.ACCEPTS_FILE}.*{words}"):
        _probed(tmp_path, monkeypatch, record)


def test_an_unprobed_sites_build_offers_its_familys_every_algorithm(tmp_path, monkeypatch):
    monkeypatch.setenv("ARDLAB_ENVS", str(tmp_path))
    assert sites.accepts("ompi-site") is None
    (site,) = sites.parse(GOOD, "f.toml", FAMILIES)
    assert site_library(site).algorithms == BUILT_IN["openmpi"].algorithms


def test_a_refusal_is_told_in_the_librarys_own_words():
    import subprocess

    from ardlab.comm.accepts import why_refused

    said = ("Abort(1090831) on node 0: Fatal error in internal_Init: Invalid MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM "
            "value (ring)\n")
    proc = subprocess.CompletedProcess([], 1, stdout="", stderr="[mpiexec@vm] cleaning up\n" + said)
    assert "Invalid MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM value (ring)" in why_refused(proc)
    assert why_refused(subprocess.CompletedProcess([], 3, stdout="", stderr="")) == "exit 3, no output"
