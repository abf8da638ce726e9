"""Data sets and the input pipeline of ardlab.nn.

``formats`` reads the data sets (synthetic, digits, MNIST, CIFAR-10, image folders, .npz shards) into a
``Dataset``; ``pipeline`` shards, shuffles, augments and prefetches its batches.
"""

from ardlab.nn.data.formats import (
                                    DATASETS,
                                    Dataset,
                                    cifar10,
                                    digits,
                                    image_folder,
                                    load,
                                    mnist,
                                    npz_shards,
                                    read_idx,
                                    synthetic,
)
from ardlab.nn.data.pipeline import augment, batches, prefetch

__all__ = ["DATASETS", "Dataset", "augment", "batches", "cifar10", "digits", "image_folder", "load", "mnist",
           "npz_shards", "prefetch", "read_idx", "synthetic"]
