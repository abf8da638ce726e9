"""ardlab.nn: a CNN training framework on mpi4py (NHWC; oneDNN kernels where they load, NumPy as the readable
reference: im2row + BLAS GEMM; data parallel over MPI).

Layers share one protocol (``layers.base.Layer``); models are short functions composing layers with a
Keras-like functional API; ``parallel`` averages gradients across ranks with any Allreduce of ``ardlab.comm``.
"""

# Data-parallel gradient exchange modes (ardlab.nn.parallel); here so the CLI can check them without MPI.
PARALLEL_MODES = ("blocking", "nonblocking", "bucketed")
