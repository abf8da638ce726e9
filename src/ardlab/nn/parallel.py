"""Data parallelism: average gradients across ranks with a native or our own Allreduce, in three modes.

- blocking: each layer's gradients are reduced as soon as backward produces them, one call per tensor.
- nonblocking: each layer's gradients are posted (native: Iallreduce; own: a progress thread on a duplicated
  communicator) during backward and waited for before the update.
- bucketed: gradients are packed into buffers of ``bucket_bytes`` (Horovod's tensor fusion), each buffer
  reduced non-blockingly once full.
Initial weights are broadcast from rank 0. Times spent in Allreduce calls and in waiting are accumulated.
"""

from __future__ import annotations

import queue
import threading
import time

import numpy as np
from mpi4py import MPI

from ardlab.nn import PARALLEL_MODES as MODES


class _OwnProgress:
    """Runs our (blocking) algorithms in one background thread so they overlap with backward compute."""

    def __init__(self, comm, fn):
        self.comm, self.fn = comm.Dup(), fn
        self.q: queue.Queue = queue.Queue()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            item = self.q.get()
            if item is None:
                return
            buf, done = item
            try:
                if self.error is None:
                    self.fn(self.comm, MPI.IN_PLACE, buf, MPI.SUM)
            except BaseException as e:  # surfaced in wait()
                self.error = e
            done.set()

    def post(self, buf):
        done = threading.Event()
        self.q.put((buf, done))
        return done

    def close(self):
        self.q.put(None)
        self.thread.join()
        self.comm.Free()


class DataParallel:
    def __init__(self, model, comm=None, mode: str = "blocking", allreduce: str = "native",
                 bucket_bytes: int = 4 << 20):
        if mode not in MODES:
            raise ValueError(f"unknown parallel mode {mode!r}; valid: {', '.join(MODES)}")
        self.model, self.comm, self.mode = model, comm or MPI.COMM_WORLD, mode
        self.size = self.comm.Get_size()
        self.allreduce_name = allreduce
        if allreduce == "native":
            self.own = None
        else:
            from ardlab.comm.own import get

            self.own = get(allreduce)
        self.progress = _OwnProgress(self.comm, self.own) if self.own and mode != "blocking" else None
        self.bucket_bytes = bucket_bytes
        self.allreduce_s = self.wait_s = 0.0
        self.layer_allreduce_s: dict[str, float] = {}  # time in on_grads per layer (posting, or the blocking call)
        self._pending: list = []
        self._bucket: list = []
        self._bucket_nbytes = 0

    def broadcast_weights(self) -> None:
        for w in self.model.weight_arrays():
            self.comm.Bcast(w, root=0)

    # -- called by Model.backward as each layer's gradients become final
    def on_grads(self, layer) -> None:
        if self.size == 1:
            return
        t0 = time.perf_counter()
        grads = list(layer.grads.values())
        if self.mode == "blocking":
            for g in grads:
                if self.own:
                    self.own(self.comm, MPI.IN_PLACE, g, MPI.SUM)
                else:
                    self.comm.Allreduce(MPI.IN_PLACE, g, op=MPI.SUM)
        elif self.mode == "nonblocking":
            for g in grads:
                self._pending.append((self._post(g), None, None))
        else:
            for g in grads:
                self._bucket.append(g)
                self._bucket_nbytes += g.nbytes
                if self._bucket_nbytes >= self.bucket_bytes:
                    self._flush_bucket()
        dt = time.perf_counter() - t0
        self.allreduce_s += dt
        self.layer_allreduce_s[layer.name] = self.layer_allreduce_s.get(layer.name, 0.0) + dt

    def _post(self, buf):
        if self.own:
            return self.progress.post(buf)
        return self.comm.Iallreduce(MPI.IN_PLACE, buf, op=MPI.SUM)

    def _flush_bucket(self):
        if not self._bucket:
            return
        flat = np.concatenate([g.reshape(-1) for g in self._bucket])
        self._pending.append((self._post(flat), flat, list(self._bucket)))
        self._bucket, self._bucket_nbytes = [], 0

    def finish(self) -> None:
        """Wait for every outstanding reduction, unpack buckets, and turn sums into averages."""
        if self.size == 1:
            return
        t0 = time.perf_counter()
        self._flush_bucket()
        for handle, flat, members in self._pending:
            if isinstance(handle, threading.Event):
                handle.wait()
            else:
                handle.Wait()
            if members:  # a fused bucket: copy the reduced values back into each gradient
                offset = 0
                for g in members:
                    g.reshape(-1)[...] = flat[offset : offset + g.size]
                    offset += g.size
        self._pending.clear()
        if self.progress is not None and self.progress.error is not None:
            raise RuntimeError(f"Allreduce {self.allreduce_name} failed: {self.progress.error}")
        self.wait_s += time.perf_counter() - t0
        inv = 1.0 / self.size
        for layer in self.model.trainable():
            for g in layer.grads.values():
                g *= inv

    def close(self):
        if self.progress is not None:
            self.progress.close()
