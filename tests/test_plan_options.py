"""Options checked from their declarations (ardlab.plan.check_options): a value outside an option's choices or bounds
is refused when the plan is made, naming the option as the command line and the config name it, the value and what
is valid; the same choices and bounds the workflow's schema has (ardlab.plan.schema_properties)."""

import pytest

from ardlab.bench import allreduce
from ardlab.horovod import train
from ardlab.nn import trainer


@pytest.mark.parametrize("options, message", [
    ({"dtype": "int7"}, "unknown dtype 'int7'; valid: float32"),
    ({"timer": "fortran"}, "unknown timer 'fortran'; valid: c"),
    ({"iterations": 0}, "iterations must be >= 1, got 0"),
    ({"warmup": -1}, "warmup must be >= 0, got -1"),
    ({"budget_mib": 0}, "budget_mib must be > 0, got 0"),
    ({"max_iterations": 0}, "max_iterations must be >= 1, got 0"),
])
def test_a_microbenchmark_option_out_of_its_declaration_is_named(options, message):
    with pytest.raises(ValueError, match=message):
        allreduce.plan("mpich", ranks=2, sizes=[8], **options)


@pytest.mark.parametrize("options, message", [
    ({"parallel_mode": "sideways"}, "unknown parallel_mode 'sideways'; valid: blocking"),
    ({"model": "resnet7"}, "unknown model 'resnet7'; valid: "),
    ({"backend": "cuda"}, "unknown backend 'cuda'; valid: auto, numpy, onednn"),
    ({"bucket_bytes": 0}, "bucket_mb must be > 0, got 0"),
    ({"batch_per_rank": 0}, "batch_per_rank must be >= 1, got 0"),
])
def test_a_training_option_out_of_its_declaration_is_named(options, message):
    with pytest.raises(ValueError, match=message):
        trainer.plan("mpich", ranks=2, options={"model": "simplecnn", **options})


def test_a_horovod_option_out_of_its_declaration_is_named():
    with pytest.raises(ValueError, match="image_size must be >= 8, got 4"):
        train.plan("mpich", ranks=2, options={"model": "simplecnn", "image_size": 4})
    # one timed iteration is a run's (advise and the call counter ask for it): within the declaration
    assert train.plan("mpich", ranks=2, options={"model": "simplecnn", **train.ask_steps(3)}).options["iterations"] == 1
