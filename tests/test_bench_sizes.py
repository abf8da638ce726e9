"""Message-size parsing for the microbenchmark."""

import pytest

from ardlab.bench.sizes import parse_size, parse_sizes


def test_units_and_ranges():
    assert parse_size("64K") == 65536 and parse_size("1MiB") == 1 << 20 and parse_size("12") == 12
    assert parse_sizes("4:64") == [4, 8, 16, 32, 64]
    assert parse_sizes("4:64M")[-1] == 64 << 20 and len(parse_sizes("4:64M")) == 25
    assert parse_sizes("1K:1M:x4") == [1024, 4096, 16384, 65536, 262144, 1048576]
    assert parse_sizes("8,4,8,1K") == [4, 8, 1024]


@pytest.mark.parametrize("bad, msg", [
    ("12Q", "cannot parse message size '12Q'"),
    ("", "empty message-size list"),
    ("64:4", "size range '64:4' must have 1 <= LO <= HI"),
    ("4:64:y2", "cannot parse range step 'y2'"),
    ("4:8:16:32", "cannot parse size range '4:8:16:32'"),
])
def test_errors_name_the_value(bad, msg):
    with pytest.raises(ValueError, match=msg):
        parse_sizes(bad)
