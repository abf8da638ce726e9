"""Run under mpiexec: k steps of data-parallel training per (mode, Allreduce); rank 0 saves the weights.

usage: check_data_parallel.py OUT.npz [BACKEND]
Global batch 12 from the digits data, float64 (float32 on the onednn backend), SGD with momentum, a CNN without
BN or dropout, so the result must equal one process on the same global batch up to rounding.
"""

import sys

import numpy as np
from mpi4py import MPI

from ardlab.nn import PARALLEL_MODES, backend, data, initializers, losses, optim
from ardlab.nn.layers import Conv2D, Dense, Flatten, Input, MaxPool2D, ReLU
from ardlab.nn.model import Model
from ardlab.nn.parallel import DataParallel

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
ds = data.digits("train")
BACKEND = sys.argv[2] if len(sys.argv) > 2 else "numpy"
DTYPE = np.float64 if BACKEND == "numpy" else np.float32
backend.set(BACKEND)
GLOBAL, STEPS = 12, 4
out = {}
for mode in PARALLEL_MODES:
    for allreduce in ("native", "own_ring", "own_rabenseifner", "own_binomial"):
        initializers.seed(100 + rank)  # different on purpose: the broadcast must make them equal
        x = inp = Input(ds.x.shape[1:])
        x = MaxPool2D(2)(ReLU()(Conv2D(6, 3)(x)))
        x = ReLU()(Dense(16)(Flatten()(x)))
        model = Model(inp, Dense(10)(x)).set_dtype(DTYPE)
        dp = DataParallel(model, comm, mode, allreduce, bucket_bytes=2000)  # several buckets
        dp.broadcast_weights()
        opt = optim.SGD(lr=0.05, momentum=0.9, nesterov=True)
        loss_fn = losses.get("categorical_crossentropy")
        for step, (xb, yb) in zip(range(STEPS), data.batches(ds, GLOBAL, rank, size, 0, seed=3)):
            logits = model.forward(xb.astype(DTYPE), training=True)
            _, g = loss_fn(logits, yb)
            model.backward(g, dp.on_grads)
            dp.finish()
            opt.step(model)
        dp.close()
        for i, w in enumerate(model.get_weights()):
            out[f"{mode}/{allreduce}/{i}"] = w
if rank == 0:
    np.savez(sys.argv[1], **out)
    print("saved", len(out), flush=True)
