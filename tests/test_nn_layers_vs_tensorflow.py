"""Every ardlab.nn layer against TensorFlow: forward, input gradient and parameter gradients, float32.

tests/programs/check_vs_tensorflow.py runs in a library environment (which holds TensorFlow), translates
each one-layer model to tf_keras with the same weights and records max |ours - TF| / max |TF| per quantity.
Tolerance 1e-5 (float32 with a different summation order; observed: <= 6e-7).
"""

import json
import subprocess

import pytest

from ardlab.comm import launch
from conftest import PROGRAMS

pytestmark = pytest.mark.tf
TOL = 1e-5


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("vs_tf") / "results.json"
    proc = subprocess.run([str(launch.python_of("mpich")), str(PROGRAMS / "check_vs_tensorflow.py"), str(out)],
                          capture_output=True, text=True, timeout=600, env={"TF_CPP_MIN_LOG_LEVEL": "2",
                                                                          "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


CASES = ["conv3x3_same", "conv3x3_stride2_valid_odd", "conv3x5_stride21_same", "conv5x5_stride2_same_nobias",
         "conv1x1", "conv_groups2", "conv_depthwise", "conv_depthwise_stride2", "maxpool2", "maxpool2_ties",
         "maxpool2_odd_valid",
         "maxpool3_stride2_ties",
         "maxpool3_stride2_same_odd", "avgpool2", "avgpool3_stride2_valid_odd", "global_avgpool", "dense",
         "dense_nobias", "batchnorm_train", "batchnorm_inference", "relu", "leaky_relu", "sigmoid", "tanh",
         "softmax", "flatten", "dropout_inference"]


@pytest.mark.parametrize("case", CASES)
def test_layer_matches_tensorflow(results, case):
    r = results[case]
    assert "error" not in r, r
    assert {"y", "dx"} <= set(r)
    bad = {k: v for k, v in r.items() if not v <= TOL}
    assert not bad, f"{case}: relative errors above {TOL}: {bad}"


def test_top_k_accuracy_matches_tensorflow(results):
    """losses.top_k_accuracy against tf.math.in_top_k: the same samples (one sample would be 1/257 = 4e-3; TF's
    float32 mean rounds at 1e-7)."""
    r = results["top_k_accuracy"]
    assert set(r) == {"k1", "k3", "k5", "k10"} and max(r.values()) < 1e-6, r
