from eosconnect.tools.verify import check_sequences


def test_exact_sequences_pass():
    report = check_sequences([("a", 0), ("a", 1), ("b", 0)], {"a": 2, "b": 1})
    assert report.ok and report.seen == 3 and report.expected == 3


def test_duplicate_is_reported():
    report = check_sequences([("a", 0), ("a", 1), ("a", 1)], {"a": 2})
    assert not report.ok and report.duplicates == 1 and report.missing == 0
    assert "sequence 1 seen 2 times" in report.anomalies[0]


def test_gap_is_reported():
    report = check_sequences([("a", 0), ("a", 2)], {"a": 3})
    assert not report.ok and report.missing == 1 and report.duplicates == 0


def test_unknown_key_and_out_of_range_are_unexpected():
    report = check_sequences([("a", 0), ("a", 5), ("zzz", 0)], {"a": 1})
    assert not report.ok and report.unexpected == 2
