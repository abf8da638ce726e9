"""Snakemake's Slurm executor with a ceiling on the wait between two status checks (executor `ardlab-slurm`).

The Slurm plugin waits 10 s longer after every status check that finds no job finished, up to 180 s. The cluster
study runs one job at a time (two measurements must never share the cores), so every second between a job's end
and Snakemake noticing it is a second in which nothing runs (what that cost on the emulated cluster, measured:
docs/workflow.md). `--ardlab-slurm-max-seconds-between-status-checks N` caps the wait at N seconds; unset, the
executor is the Slurm plugin unchanged. Every other setting is the Slurm plugin's, named `ardlab-slurm-*` instead of
`slurm-*` (the plugin's own version is pinned in containers/requirements/tools.txt).
"""

from dataclasses import dataclass, field
from typing import Optional

try:
    import snakemake_executor_plugin_slurm as slurm
except ImportError as error:  # Snakemake imports every executor plugin it finds: say what this one needs
    raise ImportError(
        "ardlab's executor ardlab-slurm extends snakemake-executor-plugin-slurm, which is not installed here: "
        "install the version pinned in containers/requirements/tools.txt"
    ) from error

common_settings = slurm.common_settings


@dataclass
class ExecutorSettings(slurm.ExecutorSettings):
    max_seconds_between_status_checks: Optional[int] = field(
        default=None,
        metadata={
            "help": "The longest wait, in seconds, between two checks of the submitted jobs' status (the Slurm "
            "plugin lets it grow by 10 s after every check that finds no job finished, up to 180 s). Meant for "
            "a cluster of one's own; on a shared cluster mind its scheduler's load.",
            "env_var": False,
            "required": False,
        },
    )

    def __post_init__(self):
        ceiling = self.max_seconds_between_status_checks
        if ceiling is not None and (isinstance(ceiling, bool) or not isinstance(ceiling, int) or ceiling < 1):
            raise ValueError(
                f"ardlab-slurm-max-seconds-between-status-checks must be a whole number of seconds >= 1, "
                f"not {ceiling!r}"
            )
        super().__post_init__()


class Executor(slurm.Executor):
    @property
    def next_seconds_between_status_checks(self):
        return slurm.Executor.next_seconds_between_status_checks.fget(self)

    @next_seconds_between_status_checks.setter
    def next_seconds_between_status_checks(self, value):
        ceiling = self.workflow.executor_settings.max_seconds_between_status_checks
        if ceiling is not None and value is not None:
            value = min(value, ceiling)
        slurm.Executor.next_seconds_between_status_checks.fset(self, value)
