"""The model registry: every model registers itself where it is defined, so a new model is one decorated function.

    @model("vgg16", depth=16)       # a name, and the arguments it fixes
    def vgg(input_shape, classes, depth=11, bn=False): ...

Models for small images (CIFAR-10's 32x32, MNIST's 28x28) go to CIFAR_MODELS, ImageNet-sized ones
(``imagenet=True``) to IMAGENET_MODELS; MODELS holds both.
"""

from __future__ import annotations

import functools

CIFAR_MODELS: dict = {}
IMAGENET_MODELS: dict = {}
MODELS: dict = {}


def model(name: str, *, imagenet: bool = False, **fixed):
    """Register the decorated builder (input_shape, classes, **kw) -> Model under `name`, with `fixed` arguments."""
    def register(build):
        if name in MODELS:
            raise ValueError(f"model {name!r} is registered twice")
        made = functools.partial(build, **fixed) if fixed else build
        (IMAGENET_MODELS if imagenet else CIFAR_MODELS)[name] = made
        MODELS[name] = made
        return build
    return register
