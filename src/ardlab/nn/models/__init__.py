"""Model zoo: short functions composing layers, each registered where it is defined (``registry.model``).
``get(name, input_shape, classes)`` builds one."""

from __future__ import annotations

from ardlab.nn.models import cnn, imagenet, resnet  # noqa: F401  (each registers its models)
from ardlab.nn.models.registry import CIFAR_MODELS, IMAGENET_MODELS, MODELS  # noqa: F401


def get(name: str, input_shape, classes: int):
    try:
        build = MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; valid: {', '.join(MODELS)}") from None
    return build(tuple(input_shape), classes)
