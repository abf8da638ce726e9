"""A rank's `apptainer exec` with a clean environment: the image sees only the settings its ranks need (issue 54.4).

Without ``--cleanenv`` Apptainer hands the caller's whole environment to the container: a site's ``PYTHONPATH``,
``LD_LIBRARY_PATH`` or ``LD_PRELOAD``, a loaded module's settings, a conda's variables reach the image's Python and
MPI and change what runs and what is measured. With it nothing passes but what is named. What a rank needs:

- the launcher's and PMI's task settings (srun's ``SLURM_*``, its plugins' ``PMI_*`` and ``PMIX_*``), which differ
  from rank to rank and exist only in the rank's own process on its node;
- the MPI libraries' settings (the forcing knobs among them), their transports' (UCX, libfabric, PSM2), the thread and
  framework settings, ardlab's own (``PASS_PREFIXES``, ``PASS_NAMES``);
- the settings the launch itself adds (``keep``: the driver's run settings, whatever their names).

So the choice is made in the rank's own shell: ``exec_argv`` wraps the exec in a few lines of sh that export
``APPTAINERENV_<NAME>`` for each variable kept (Apptainer passes those into a clean environment, values as they are)
and then run ``apptainer exec --cleanenv``. The image's own ``%environment`` (its PATH, its ``ARDLAB_ENVS``) applies
on top, as always.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

PASS_PREFIXES = (
    "SLURM_", "PMI_", "PMIX_",  # the launcher's and PMI's task settings
    "OMPI_", "PRTE_", "MPIR_CVAR_", "MPICH_", "HYDRA_", "I_MPI_",  # the MPI libraries' own
    "UCX_", "FI_", "PSM2_",  # their transports'
    "OMP_", "MKL_", "OPENBLAS_", "NUMEXPR_", "KMP_", "TF_", "HOROVOD_", "NUMBA_",  # threads and frameworks
    "ARDLAB_",
)
PASS_NAMES = ("TMPDIR", "LANG", "LC_ALL", "TZ")

# $1: the names kept beyond the prefixes (space-separated), $2: apptainer, then exec's arguments. A name is taken
# from `env`'s lines (a value's own newlines can add words that name no variable or another one: both harmless).
_SCRIPT = """keep=" $1 "; apptainer=$2; shift 2
for name in $(env | sed -n 's/^\\([A-Za-z_][A-Za-z0-9_]*\\)=.*/\\1/p'); do
  case $name in
    {patterns}) ;;
    *) case $keep in *" $name "*) ;; *) continue ;; esac ;;
  esac
  eval "export APPTAINERENV_$name=\\"\\${{$name}}\\""
done
exec "$apptainer" exec --cleanenv "$@"
"""


def script() -> str:
    """The sh that keeps a rank's needed settings and runs ``apptainer exec --cleanenv``."""
    return _SCRIPT.format(patterns="|".join([*(f"{p}*" for p in PASS_PREFIXES), *PASS_NAMES]))


def exec_argv(image: str, command: Sequence[str], keep: Iterable[str] = (), apptainer: str = "apptainer",
              options: Sequence[str] = ()) -> list[str]:
    """The argv of one rank: `command` inside `image` under ``apptainer exec --cleanenv [options]``, with the settings
    of ``PASS_PREFIXES`` and ``PASS_NAMES`` and the names in `keep` passed in from the rank's own environment."""
    names = sorted(set(keep))
    bad = [n for n in names if not n.replace("_", "a").isalnum() or n[0].isdigit()]
    if bad:
        raise ValueError(f"not names of environment variables: {', '.join(map(repr, bad))}")
    return ["sh", "-c", script(), "ardlab-image-exec", " ".join(names), apptainer, *options, str(image), *command]
