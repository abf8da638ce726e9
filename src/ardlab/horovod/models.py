"""Keras (tf_keras) models for `ardlab train-tf`.

Two kinds: the ImageNet-size networks of ``keras.applications`` (as Horovod's synthetic benchmark uses), and
every ardlab.nn model translated layer by layer from its graph (``from_ardlab``), so that the two frameworks
train exactly the same architecture and can even share weights (``copy_weights``).
"""

from __future__ import annotations

import os

# Horovod's Keras integration and our loop need Keras 2 semantics (tf_keras); Keras 3 with Horovod silently
# does not average gradients. Set before TensorFlow is imported anywhere in the process.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

# name -> (keras.applications constructor, smallest input side it accepts)
APPLICATIONS = {
    "keras_resnet50": ("ResNet50", 32),
    "keras_vgg16": ("VGG16", 32),
    "keras_inceptionv3": ("InceptionV3", 75),
    "keras_mobilenetv2": ("MobileNetV2", 32),
    "keras_densenet121": ("DenseNet121", 32),
}


def keras():
    try:
        import tf_keras
    except ImportError as e:
        raise RuntimeError("this environment has no TensorFlow/tf_keras; set it up with containers/install-env "
                           "(TensorFlow and Horovod are part of every library environment)") from e
    return tf_keras


def model_names() -> list[str]:
    from ardlab.nn.models import MODELS

    return list(MODELS) + list(APPLICATIONS)


def build(name: str, input_shape, classes: int):
    """A Keras model by name: an ardlab.nn model translated, or a keras.applications network."""
    from ardlab.nn import models as nn_models

    input_shape = tuple(int(v) for v in input_shape)
    if name in APPLICATIONS:
        ctor, smallest = APPLICATIONS[name]
        if min(input_shape[:2]) < smallest:
            raise ValueError(f"model {name} needs images of at least {smallest}x{smallest}, got "
                             f"{input_shape[0]}x{input_shape[1]} (use --image-size)")
        if input_shape[2] != 3:
            raise ValueError(f"model {name} needs 3-channel images, got {input_shape[2]} channels")
        return getattr(keras().applications, ctor)(weights=None, input_shape=input_shape, classes=classes)
    if name not in nn_models.MODELS:
        raise ValueError(f"unknown model {name!r}; valid: {', '.join(model_names())}")
    return from_ardlab(nn_models.get(name, input_shape, classes))


def from_ardlab(model):
    """Translate an ardlab.nn Model graph into a functional Keras model with the same layers and names."""
    k = keras()
    inp = k.Input(model.input_shape, name="input")
    values = {model.input.id: inp}
    for t in model.nodes:
        args = [values[i.id] for i in t.inputs]
        layer = t.layer.keras_equivalent(k.layers, t.inputs[0].shape)
        values[t.id] = layer(args if t.layer.multi_input else args[0])
    return k.Model(inp, values[model.output.id], name=model.name)


def copy_weights(src, dst) -> None:
    """Set a Keras model's weights from an ardlab.nn model translated by `from_ardlab` (same layer names)."""
    from ardlab.nn import layers as L

    for layer in src.layers:
        if not layer.params:
            continue
        kl = dst.get_layer(layer.name)
        if isinstance(layer, L.BatchNormalization):
            kl.set_weights([layer.params["gamma"], layer.params["beta"], *layer.state.values()])
            continue
        kernel = layer.params["kernel"]
        if isinstance(layer, L.Conv2D) and type(kl).__name__ == "DepthwiseConv2D":
            kernel = kernel.transpose(0, 1, 3, 2)  # (kh, kw, 1, C) -> Keras depthwise (kh, kw, C, 1)
        kl.set_weights([kernel] + ([layer.params["bias"]] if "bias" in layer.params else []))


def plain_step(tf, model, loss_fn, opt):
    """One training step without any Allreduce (forward, backward, update), as a tf.function: TensorFlow's own
    speed (bench.vs_tensorflow) and each rank's compute alone (train-tf --compute-batches)."""
    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return step
