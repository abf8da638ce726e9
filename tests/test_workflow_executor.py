"""Executor `ardlab-slurm` (src/snakemake_executor_plugin_ardlab_slurm): the Slurm plugin with a ceiling on the wait
between status checks. Snakemake finds it, it has every Slurm setting under its own name, and a bad ceiling is refused
before anything runs. That the ceiling makes Snakemake notice a finished Slurm job sooner is tested on the emulated
cluster (tests/test_cluster.py::test_snakemake_checks_a_running_job_within_the_ceiling).
"""

import dataclasses
import subprocess
import sys

import snakemake_executor_plugin_slurm as slurm
from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry


def test_snakemake_finds_the_executor_with_every_slurm_setting():
    plugin = ExecutorPluginRegistry().get_plugin("ardlab-slurm")
    fields = {f.name for f in dataclasses.fields(plugin.settings_cls)}
    assert {f.name for f in dataclasses.fields(slurm.ExecutorSettings)} < fields
    assert "max_seconds_between_status_checks" in fields
    assert plugin.common_settings is slurm.common_settings


def test_a_ceiling_below_one_second_is_refused_naming_the_value(tmp_path):
    (tmp_path / "Snakefile").write_text('rule a:\n    output: "a"\n    shell: "touch {output}"\n')
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--executor", "ardlab-slurm", "--jobs", "1",
                           "--ardlab-slurm-max-seconds-between-status-checks", "0", "--directory", str(tmp_path),
                           "--snakefile", str(tmp_path / "Snakefile")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    message = "max-seconds-between-status-checks must be a whole number of seconds >= 1, not 0"
    assert message in proc.stderr + proc.stdout, proc.stderr[-3000:]
    assert not (tmp_path / "a").exists()
