"""The emulated links' queue (ardlab.cluster.links): its names and notations, what tbf is told, what rows record."""

from __future__ import annotations

import json

import pytest

from ardlab.cluster import links


@pytest.mark.parametrize("queue, value, tbf", [
    ("switch-port", "233016b", ["limit", "233016b"]),  # 12 MiB over Trident II's 54 ports
    (None, "1ms", ["latency", "1ms"]),  # the default: the committed runs' queue
    ("2ms", "2ms", ["latency", "2ms"]),
    ("300kb", "300kb", ["limit", "307200b"]),  # tc's kb: 1024 bytes
])
def test_a_queue_in_its_notations(queue, value, tbf):
    assert links.check_queue(queue) == value and links.tbf_queue(value) == tbf
    assert links.QUEUES["switch-port"] == f"{12 * 2**20 // 54}b"


@pytest.mark.parametrize("bad", ["fast", "0ms", "1 ms", "-3kb", "3 kb", ""])
def test_a_bad_queue_is_named(bad):
    with pytest.raises(ValueError, match=f"link queue {bad!r} is not one"):
        links.check_queue(bad)


def test_a_clusters_queue_is_what_its_rows_record(tmp_path):
    """links.link_queue reads the cluster's record beside its Slurm configuration: the queue's name where it has
    one, 1ms for a record from before the setting, "none" for unlimited links; off a cluster, empty."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("")
    env = {"SLURM_CONF": str(conf)}
    assert links.link_queue(env) == ""
    for record, expected in (({"rate": "1gbit", "queue": links.QUEUES["switch-port"]}, "switch-port"),
                             ({"rate": "250mbit", "queue": "2ms"}, "2ms"), ({"rate": "1gbit"}, "1ms"),
                             ({"rate": None, "queue": "1ms"}, "none")):
        (tmp_path / "cluster.json").write_text(json.dumps(record))
        assert links.link_queue(env) == expected, record
