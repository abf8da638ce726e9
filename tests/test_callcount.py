"""The Allreduce calls of training runs, counted (ardlab.callcount): checked against the model's own parameters (an
independent reference)."""

import pytest

from ardlab import callcount


def _parameter_bytes(model: str) -> list[int]:
    """Bytes of each trainable array of ardlab.nn's `model` on the synthetic CIFAR-sized input (float32)."""
    from ardlab.nn.models import get

    return sorted(4 * layer.params[k].size for layer, k in get(model, (32, 32, 3), 10).parameters())


@pytest.mark.parametrize("framework", callcount.FRAMEWORKS)
def test_a_steps_gradient_bytes_are_the_models_parameters(framework):
    """ardlab.nn (blocking mode) sums each parameter array once per step; Horovod fuses them as they come ready, but
    the summed bytes of its steps are still the parameters' (fusion only groups them). Both add one sum at the end of
    the run: the summary's loss, accuracy and top-5 (3 float64)."""
    steps = 3
    rows = callcount.measure(framework, "mpich", 2, "simplecnn", steps=steps)
    params = _parameter_bytes("simplecnn")
    sums = [r for r in rows if r["op"] == "sum"]
    metrics = 3 * 8
    if framework == "nn":
        assert [r for r in sums if r["calls"] % steps] == [r for r in sums if r["bytes"] == metrics]
        grads = sorted(r["bytes"] for r in sums if r["bytes"] != metrics for _ in range(r["calls"] // steps))
        assert grads == params
        assert len(sums) == len(rows)
    else:
        assert sum(r["bytes"] * r["calls"] for r in sums) - metrics == steps * sum(params)
        assert {r["op"] for r in rows} <= {"sum", "band", "bor"}
