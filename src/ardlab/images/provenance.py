"""What an image is made of, as keys, and the check that an image holds the checkout's ardlab.

containers/build makes each image in two layers: the *stack* (``containers/<library>.def``: Debian, the MPI library,
mpi4py, NumPy, TensorFlow, Horovod built against that MPI) and *ardlab's own files* on top of it
(``containers/ardlab-layer.def``). Each layer has a key, a hash of what decides it:

- the stack key: the definition as built (its pins rendered from the table, its first stage: docker or debootstrap)
  and the scripts and requirements its %post runs (``STACK_FILES``);
- the source key: every file the layer copies (``SOURCE_PATHS``: the repository's tracked and unignored files).

The keys and the commit go into the image's labels (``ardlab.stack``, ``ardlab.source``, ``ardlab.commit``); an image
whose source key is not the checkout's is refused by name before anything runs (``check``), and ranks inside an
image read their labels (``in_image``) to write them into every row.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

from ardlab.comm.launch import repo_root

STACK_FILES = ("containers/install-env", "containers/install-horovod", "containers/requirements", "pyproject.toml")
SOURCE_PATHS = ("src", "containers", "pyproject.toml", "README.md")
LABEL_SOURCE = "ardlab.source"
LABEL_STACK = "ardlab.stack"
LABEL_COMMIT = "ardlab.commit"
LABELS_IN_IMAGE = Path("/.singularity.d/labels.json")  # where Apptainer keeps the labels inside a running image


def files(paths: tuple[str, ...], root: Path | None = None) -> list[str]:
    """The files under `paths` (relative to `root`, sorted): git's tracked and unignored ones in a checkout, every
    file but Python's caches elsewhere (a source tarball)."""
    root = Path(root or repo_root())
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard",
                              "--", *paths], capture_output=True, check=True).stdout.decode()
        names = [n for n in out.split("\0") if n]
    except (OSError, subprocess.CalledProcessError):
        names = [str(p.relative_to(root)) for top in paths for p in (root / top).rglob("*") if p.is_file()]
        names += [t for t in paths if (root / t).is_file()]
    return sorted({n for n in names if (root / n).is_file() and "__pycache__" not in Path(n).parts})


def digest(names: list[str], root: Path | None = None, prefix: bytes = b"") -> str:
    """16 hex digits of a hash over `prefix`, then each file's path and content hash."""
    root = Path(root or repo_root())
    h = hashlib.sha256(prefix)
    for name in names:
        h.update(f"{hashlib.sha256((root / name).read_bytes()).hexdigest()}  {name}\n".encode())
    return h.hexdigest()[:16]


def stack_key(definition: Path, root: Path | None = None) -> str:
    """The key of a stack built from `definition` (the file given to ``apptainer build``)."""
    return digest(files(STACK_FILES, root), root, prefix=Path(definition).read_bytes())


def source_key(root: Path | None = None) -> str:
    """The key of ardlab's own files, as the layer copies them from `root`."""
    return digest(files(SOURCE_PATHS, root), root)


def commit(root: Path | None = None) -> str:
    """The checkout's commit, with ``+changes`` when a file the layer copies differs from it ("unknown" outside git)."""
    root = Path(root or repo_root())
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=all", "--",
                                 *SOURCE_PATHS], capture_output=True, text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    changed = [line for line in status if "__pycache__/" not in line]  # as the key: Python's caches are not ardlab's
    return head + ("+changes" if changed else "")


def labels(image: Path, apptainer: str = "apptainer") -> dict[str, str]:
    """An image's labels, as ``apptainer inspect`` reads them."""
    proc = subprocess.run([apptainer, "inspect", "--json", "--labels", str(image)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ValueError(f"{image} is not an image apptainer can read (apptainer inspect: "
                         f"{proc.stderr.strip()[-300:]})")
    return json.loads(proc.stdout)["data"]["attributes"]["labels"] or {}


def check(image: Path, library: str, root: Path | None = None, apptainer: str = "apptainer") -> dict[str, str]:
    """Refuse an image that does not hold the checkout's ardlab (naming it, both keys and how to mend it); its
    labels when it does."""
    found = labels(image, apptainer)
    built = found.get(LABEL_SOURCE)
    mend = f"containers/build {library} makes it from this checkout"
    if not built:
        raise ValueError(f"image {image} has no {LABEL_SOURCE} label, so which ardlab it holds is unknown (it was not "
                         f"made by containers/build, or before images carried their keys): {mend}")
    want = source_key(root)
    if built != want:
        raise ValueError(f"image {image} is stale: it holds ardlab's files {built} (commit "
                         f"{found.get(LABEL_COMMIT, 'unknown')}), this checkout's are {want} ({commit(root)}): {mend}")
    return found


def in_image() -> dict[str, str]:
    """Inside an image made by containers/build: its source key and commit (``{}`` outside one)."""
    if not (os.environ.get("APPTAINER_CONTAINER") or os.environ.get("SINGULARITY_CONTAINER")):
        return {}
    try:
        found = json.loads(LABELS_IN_IMAGE.read_text())
    except (OSError, ValueError):
        return {}
    return {k: found[k] for k in (LABEL_SOURCE, LABEL_COMMIT) if k in found}


def row_fields() -> dict[str, str]:
    """The image columns of a row (ardlab.results.IMAGE_COLUMNS): empty outside an image."""
    found = in_image()
    return {"image_source": found.get(LABEL_SOURCE, ""), "image_commit": found.get(LABEL_COMMIT, "")}
