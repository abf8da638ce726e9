"""The Apptainer images' recipes, proven where Apptainer cannot run: each definition's own sections run in a fresh
Debian root (``definition``: the sections, ``rootfs``: the root, ``prove``: running them, ``python -m
ardlab.images``)."""
