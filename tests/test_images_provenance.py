"""An image's provenance (ardlab.images.provenance): the two layers' keys move with what decides each layer and
nothing else, a stale or unlabelled image is refused by name, and rows made inside an image carry its labels. The
real image's labels, read by Apptainer and refused when stale, are in tests/test_apptainer.py (slow)."""

import json
import shutil
import subprocess

import pytest

from ardlab.images import provenance
from ardlab.results import BENCH_COLUMNS, IMAGE_COLUMNS, TRAIN_COLUMNS


@pytest.fixture
def checkout(tmp_path):
    """A small git checkout with the paths the layers read."""
    root = tmp_path / "repo"
    for name, text in {"src/ardlab/a.py": "A = 1\n", "containers/install-env": "#!/bin/sh\n",
                       "containers/requirements/base.txt": "numpy\n", "pyproject.toml": "[project]\n",
                       "README.md": "# r\n", ".gitignore": "*.so\n", "docs/x.md": "x\n"}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    return root


def test_source_key_moves_with_the_files_the_layer_copies_only(checkout):
    key = provenance.source_key(checkout)
    (checkout / "docs" / "x.md").write_text("changed\n")  # not copied into an image
    (checkout / "src" / "ardlab" / "b.so").write_text("built\n")  # ignored by git
    (checkout / "src" / "ardlab" / "__pycache__").mkdir()
    (checkout / "src" / "ardlab" / "__pycache__" / "a.pyc").write_text("cache\n")
    assert provenance.source_key(checkout) == key
    assert provenance.commit(checkout).endswith("+changes") is False
    (checkout / "src" / "ardlab" / "a.py").write_text("A = 2\n")
    assert provenance.source_key(checkout) != key
    assert provenance.commit(checkout).endswith("+changes")
    (checkout / "src" / "ardlab" / "a.py").write_text("A = 1\n")
    (checkout / "src" / "ardlab" / "new.py").write_text("")  # untracked, not ignored: copied, so counted
    assert provenance.source_key(checkout) != key


def test_stack_key_moves_with_the_definition_and_the_install_scripts_not_with_ardlab(checkout, tmp_path):
    definition = tmp_path / "mpich.def"
    definition.write_text("Bootstrap: docker\n")
    key = provenance.stack_key(definition, checkout)
    (checkout / "src" / "ardlab" / "a.py").write_text("A = 2\n")  # ardlab's files are the layer's
    assert provenance.stack_key(definition, checkout) == key
    (checkout / "containers" / "requirements" / "base.txt").write_text("numpy==2\n")
    assert provenance.stack_key(definition, checkout) != key
    (checkout / "containers" / "requirements" / "base.txt").write_text("numpy\n")
    definition.write_text("Bootstrap: debootstrap\n")
    assert provenance.stack_key(definition, checkout) != key


def test_keys_of_a_tree_outside_git_are_those_of_its_files(checkout):
    shutil.rmtree(checkout / ".git")
    (checkout / "src" / "ardlab" / "__pycache__").mkdir()
    (checkout / "src" / "ardlab" / "__pycache__" / "a.pyc").write_text("cache\n")
    key = provenance.source_key(checkout)
    assert provenance.commit(checkout) == "unknown"
    (checkout / "README.md").write_text("# other\n")
    assert provenance.source_key(checkout) != key


def test_a_stale_or_unlabelled_image_is_refused_naming_it(checkout, monkeypatch, tmp_path):
    image = tmp_path / "ardlab-mpich.sif"
    key = provenance.source_key(checkout)
    monkeypatch.setattr(provenance, "labels", lambda image, apptainer="apptainer": {})
    with pytest.raises(ValueError, match=r"ardlab-mpich.sif has no ardlab.source label.*containers/build mpich"):
        provenance.check(image, "mpich", checkout)
    monkeypatch.setattr(provenance, "labels", lambda image, apptainer="apptainer": {
        provenance.LABEL_SOURCE: "0123456789abcdef", provenance.LABEL_COMMIT: "abc"})
    with pytest.raises(ValueError, match=rf"ardlab-mpich.sif is stale: .*0123456789abcdef \(commit abc\).*{key}"):
        provenance.check(image, "mpich", checkout)
    monkeypatch.setattr(provenance, "labels", lambda image, apptainer="apptainer": {provenance.LABEL_SOURCE: key})
    assert provenance.check(image, "mpich", checkout)[provenance.LABEL_SOURCE] == key


def test_an_image_the_config_names_is_checked_before_any_job(tmp_path, monkeypatch):
    from ardlab.study.config import check_images

    not_an_image = tmp_path / "mpich.sif"
    not_an_image.write_text("text")
    config = {"launcher": "srun", "libraries": ["mpich"], "images": {"mpich": str(not_an_image)}}
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ValueError, match=r"'images.mpich': .*mpich.sif' cannot be checked.*apptainer is not on PATH"):
        check_images(config)
    check_images({**config, "launcher": "mpiexec"})  # images are used under srun only


def test_rows_carry_the_image_they_were_made_in(tmp_path, monkeypatch):
    assert set(IMAGE_COLUMNS) <= set(BENCH_COLUMNS) and set(IMAGE_COLUMNS) <= set(TRAIN_COLUMNS)
    monkeypatch.delenv("APPTAINER_CONTAINER", raising=False)
    monkeypatch.delenv("SINGULARITY_CONTAINER", raising=False)
    assert provenance.row_fields() == {"image_source": "", "image_commit": ""}
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({provenance.LABEL_SOURCE: "k", provenance.LABEL_COMMIT: "c", "other": "x"}))
    monkeypatch.setattr(provenance, "LABELS_IN_IMAGE", labels)
    monkeypatch.setenv("APPTAINER_CONTAINER", "/x.sif")
    assert provenance.row_fields() == {"image_source": "k", "image_commit": "c"}
