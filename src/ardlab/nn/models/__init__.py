"""Model zoo: short functions composing layers. ``get(name, input_shape, classes)`` builds one."""

from __future__ import annotations

from ardlab.nn.models import cnn, imagenet, resnet

# Models for small images (CIFAR-10's 32x32, MNIST's 28x28) and for ImageNet-sized ones; a new model is one entry.
CIFAR_MODELS = {
    "simplecnn": cnn.simplecnn,
    "lenet5": cnn.lenet5,
    "alexnet": cnn.alexnet_cifar,
    "vgg11": lambda s, c: cnn.vgg(s, c, 11, bn=False),
    "vgg11bn": lambda s, c: cnn.vgg(s, c, 11, bn=True),
    "vgg16": lambda s, c: cnn.vgg(s, c, 16, bn=False),
    "vgg16bn": lambda s, c: cnn.vgg(s, c, 16, bn=True),
    "resnet20": lambda s, c: resnet.resnet_cifar(s, c, 20),
    "resnet32": lambda s, c: resnet.resnet_cifar(s, c, 32),
    "resnet56": lambda s, c: resnet.resnet_cifar(s, c, 56),
    "mobilenetv1": cnn.mobilenet_v1,
}
IMAGENET_MODELS = {
    "alexnet_imagenet": imagenet.alexnet_imagenet,
    "resnet18": lambda s, c: imagenet.resnet_imagenet(s, c, 18),
    "resnet34": lambda s, c: imagenet.resnet_imagenet(s, c, 34),
    "resnet50": lambda s, c: imagenet.resnet_imagenet(s, c, 50),
    "densenet121": imagenet.densenet121,
}
MODELS = {**CIFAR_MODELS, **IMAGENET_MODELS}


def get(name: str, input_shape, classes: int):
    try:
        build = MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; valid: {', '.join(MODELS)}") from None
    return build(tuple(input_shape), classes)
