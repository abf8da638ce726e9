#!/usr/bin/env bash
# Device run for issue 43: ardlab.experiments.core_per_rank on a machine with a core per rank.
# Stages an Intel MPI environment from the carried, trimmed impi-rt 2021.18.1 wheel contents and mpi4py 4.1.2.
set -uo pipefail
export PYTHONUNBUFFERED=1
echo "== machine"; date -u; nproc; python3 -V; uname -r
grep -m1 "model name" /proc/cpuinfo; grep -m1 "cpu family" /proc/cpuinfo; grep -m1 "^model" /proc/cpuinfo
lscpu 2>/dev/null | grep -i -E "thread|core|socket|numa" ; for c in ip tc slurmctld srun munged nsenter unshare taskset; do printf "%s: %s\n" $c "$(command -v $c)"; done
python3 -c "import os; print('affinity', sorted(os.sched_getaffinity(0)))"
ip netns add probe-x 2>&1 && ip netns del probe-x && echo netns ok
root=$PWD
export ARDLAB_ENVS=/tmp/envs
env=$ARDLAB_ENVS/intelmpi
python3 -m venv --system-site-packages $env || exit 3
tar xJf .devcarry/impi-trim.tar.xz -C $env || exit 3
$env/bin/python -m pip install -q --no-index --no-deps --no-compile .devcarry/mpi4py-*.whl || exit 3
site=$($env/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$root/src" > "$site/ardlab-src.pth"
# the machine's own packages (pandas, numba, ...) after the environment's: its python3 may itself be a venv
python3 -c 'import site; print("\n".join(site.getsitepackages()))' > "$site/zz-machine-site.pth"
printf '#!%s\nimport sys\nfrom ardlab.cli import main\nsys.exit(main())\n' "$env/bin/python" > $env/bin/ardlab
chmod +x $env/bin/ardlab
cd /tmp && I_MPI_PIN=0 $env/bin/mpiexec -n 2 $env/bin/python -c "from mpi4py import MPI; import ardlab, numpy, pandas, scipy; c=MPI.COMM_WORLD; print(c.rank, MPI.Get_library_version()[:44], c.allreduce(c.rank))" || exit 4
cd $root
mkdir -p $OUT/run
echo "== run $(date -u)"
timeout ${RUN_LIMIT:-420} $env/bin/python -m ardlab.experiments.core_per_rank --nodes ${NODES:-2,4} --ranks-per-node ${RPN:-2} \
  --fallback-ranks ${RANKS:-8} --rounds ${ROUNDS:-5} --steps ${STEPS:-3} --sizes ${SIZES:-256K,1M,4M} \
  --output $OUT/run/core_per_rank 2>&1 | tee $OUT/run.log
echo "rc=${PIPESTATUS[0]} $(date -u)"
cd $OUT/run && tar czf ../core_per_rank.tgz core_per_rank && ls -la $OUT
