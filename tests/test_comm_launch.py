"""launch.execute starts again a launch that failed in a library's known start-up race, and only that; and stops a
launch that hangs after its ranks made their finished mark (the last test).

Open MPI 5's ranks can crash inside MPI_Init (ob1 is handed a message before it is ready for it; the table's
`init_crash_why`): seen on the emulated cluster under srun, how often in docs/cluster.md. The race cannot be caused at
will (a rank held back in MPI_Init's last fence by a preloaded shim did not crash it, 2 and 4 ranks), so these tests
replay the report of a real crash (tests/data/openmpi_init_crash.txt) from a process that then dies of SIGSEGV, as
the rank did: what they prove is how execute treats such a launch.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ardlab.comm import launch, library

REPORT = "".join(line for line in (Path(__file__).parent / "data" / "openmpi_init_crash.txt").read_text()
                 .splitlines(keepends=True) if not line.startswith("#"))

# A launch that counts its attempts in a file, prints the recorded report and dies of SIGSEGV while
# attempts <= crashes; after that it starts normally.
_REPLAY = """
import os, signal, sys
from pathlib import Path
count, crashes, report = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
n = int(count.read_text()) + 1 if count.exists() else 1
count.write_text(str(n))
if n <= crashes:
    sys.stderr.write(report)
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGSEGV)
print("STARTED", flush=True)
"""


def _launch(tmp_path, crashes: int, report: str = REPORT):
    count = tmp_path / "attempts"
    proc = launch.execute([sys.executable, "-c", _REPLAY, str(count), str(crashes), report], {}, timeout=60)
    return proc, int(count.read_text())


def test_the_recorded_crash_is_open_mpis_init_race_and_nothing_else_is():
    failed = launch.subprocess.CompletedProcess([], -11, "", REPORT)
    assert launch.init_crash(failed) == f"Open MPI: {library('openmpi').init_crash_why}"
    assert launch.init_crash(launch.subprocess.CompletedProcess([], 0, "", REPORT)) is None  # it ended well
    # a crash in the program, after MPI_Init: not a start-up race
    assert launch.init_crash(launch.subprocess.CompletedProcess([], -11, "", REPORT.replace(
        "(ompi_mpi_init+", "(ompi_coll_base_allreduce_intra_ring+"))) is None
    # one rank's segfault and another rank's MPI_Init frame (their reports interleaved): not one crash in MPI_Init
    pid = re.search(r"^\[(\S+?)\]", REPORT).group(1)
    other = "".join(line.replace(pid, "n9:00001", 1) if "ompi_mpi_init" in line else line
                    for line in REPORT.splitlines(keepends=True))
    assert launch.init_crash(launch.subprocess.CompletedProcess([], -11, other, "")) is None


def test_a_launch_whose_rank_crashed_in_mpi_init_is_started_again(tmp_path, capsys):
    proc, attempts = _launch(tmp_path, crashes=1)
    assert proc.returncode == 0 and "STARTED" in proc.stdout, proc.stderr
    assert attempts == 2
    said = capsys.readouterr().err
    assert "a rank crashed in MPI_Init, before the program ran" in said and "attempt 2 of 3" in said, said


def test_a_launch_that_crashes_every_time_fails_after_its_last_attempt(tmp_path, capsys):
    proc, attempts = _launch(tmp_path, crashes=99)
    assert attempts == launch.START_ATTEMPTS
    assert proc.returncode != 0 and "ompi_mpi_init" in proc.stderr  # the last attempt's own report
    assert capsys.readouterr().err.count("launching again") == launch.START_ATTEMPTS - 1


def test_a_crash_in_the_program_is_not_started_again(tmp_path, capsys):
    proc, attempts = _launch(tmp_path, crashes=1, report=REPORT.replace("(ompi_mpi_init+", "(PMPI_Allreduce+"))
    assert attempts == 1 and proc.returncode != 0
    assert "launching again" not in capsys.readouterr().err


def test_a_launch_that_hangs_after_its_finished_mark_is_stopped_and_stands(tmp_path, monkeypatch):
    """A launch whose ranks made the finished mark and then do not end (Debian's MPICH 4.0 over UCX's TCP in
    MPI_Finalize) is stopped FINALIZE_GRACE_S later and returned as succeeded, saying so; one without the mark runs on
    to its timeout as before. The hang is a process that sleeps after making the mark."""


    monkeypatch.setattr(launch, "FINALIZE_GRACE_S", 1.0)
    monkeypatch.setattr(launch, "_POLL_S", 0.2)
    mark = launch.finished_mark(tmp_path / "plan.json")
    assert mark.name == "plan.json.finished"
    hang = [sys.executable, "-c", f"import pathlib, time; print('rows'); pathlib.Path({str(mark)!r}).touch(); "
                                  "time.sleep(600)"]
    for capture in (True, False):
        mark.unlink(missing_ok=True)
        proc = launch.execute(hang, dict(os.environ), timeout=60, capture=capture, finished=mark)
        assert proc.returncode == 0
        if capture:
            assert proc.stdout == "rows\n" and "hung in MPI_Finalize" in proc.stderr, proc.stderr
    said = [sys.executable, "-c", "import time; print('all done', flush=True); time.sleep(600)"]
    proc = launch.execute(said, dict(os.environ), timeout=60, finished="all done")  # a line of its output, captured
    assert proc.returncode == 0 and "hung in MPI_Finalize" in proc.stderr
    with pytest.raises(subprocess.TimeoutExpired):
        launch.execute([sys.executable, "-c", "import time; time.sleep(600)"], dict(os.environ), timeout=2,
                       finished=tmp_path / "never.finished")
