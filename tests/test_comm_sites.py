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
