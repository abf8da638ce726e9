"""Microbenchmarks: the Allreduce latency benchmark (OSU/IMB method)."""
