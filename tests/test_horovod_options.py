"""train-tf's optimizers come from ardlab.nn's one registry: those TensorFlow + Horovod maps to Keras are offered,
and one ardlab.nn has but Horovod here lacks is refused when the options are read, naming it (not at run time)."""

import pytest

from ardlab.horovod import train
from ardlab.nn.optim import OPTIMIZERS


def test_every_offered_optimizer_is_in_the_registry_and_maps_to_keras():
    offered = train.tf_optimizer_names()
    assert offered and set(offered) <= set(OPTIMIZERS) and set(offered) <= set(train.KERAS_OPTIMIZERS)


def test_an_optimizer_only_ardlab_nn_has_is_refused_when_options_are_read(monkeypatch):
    monkeypatch.setitem(OPTIMIZERS, "lamb", OPTIMIZERS["sgd"])  # an optimizer added to ardlab.nn alone
    with pytest.raises(ValueError, match=r"optimizer 'lamb' \(ardlab.nn has it; TensorFlow \+ Horovod here does not"):
        train.plan("mpich", ranks=2, options={"model": "simplecnn", "optimizer": "lamb"})
    with pytest.raises(ValueError, match="optimizer 'adagrad'; train-tf offers sgd"):
        train.plan("mpich", ranks=2, options={"model": "simplecnn", "optimizer": "adagrad"})
    assert "lamb" not in train.tf_optimizer_names()
