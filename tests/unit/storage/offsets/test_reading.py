"""Which partitions of an offsets topic a kept reader must read again from the beginning."""

from __future__ import annotations

from eosconnect.storage.offsets.reading import rewound_partitions


def test_a_topic_that_grew_or_stayed_is_not_rewound():
    assert rewound_partitions({0: 5, 1: 0}, {0: 5, 1: 3}) == {}
    assert rewound_partitions({}, {0: 0}) == {}


def test_a_topic_that_ends_before_the_position_read_or_lost_the_partition_is():
    assert rewound_partitions({0: 5, 1: 4}, {0: 2, 1: 4}) == {0: (5, 2)}
    assert rewound_partitions({0: 5, 2: 1}, {0: 5}) == {2: (1, None)}
