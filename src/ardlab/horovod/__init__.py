"""TensorFlow + Horovod training (`ardlab train-tf`): Keras models and the timed data-parallel loop."""
