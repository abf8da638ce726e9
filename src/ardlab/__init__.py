"""ardlab: measure which MPI library and Allreduce algorithm make data-parallel CNN training fastest.

Importing the package is cheap and needs only the standard library; the parts that need NumPy, mpi4py,
TensorFlow or pandas import them where they are used.
"""

__version__ = "0.1.0"
