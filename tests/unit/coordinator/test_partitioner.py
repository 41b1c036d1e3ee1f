"""A key (group or transactional id) lands on the partition Kafka would choose (Java's hash)."""

from odradek.coordinator.partitioner import java_string_hash, partition_for


def test_java_string_hash_matches_java():
    # Values from Java's String.hashCode.
    assert java_string_hash("") == 0
    assert java_string_hash("test") == 3556498
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert java_string_hash("é😀") == 1996812  # UTF-16 surrogates count as two units


def test_partition_for_is_abs_modulo():
    assert partition_for("test", 50) == 3556498 % 50
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    assert java_string_hash("consumers") < 0  # a negative hash still gives a valid partition
    assert partition_for("consumers", 50) == abs(java_string_hash("consumers")) % 50
