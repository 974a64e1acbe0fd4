"""murmur2 bit-exact with Kafka's Utils.murmur2, and DefaultPartitioner's choices.

Vectors: the five of Kafka's UtilsTest, plus values computed on the JVM (OpenJDK 17) by a Java
transcription of the MurmurHash2 specification with Kafka's seed and its `& 0xff` byte handling.
kafka-python's murmur2 (an independent port, returning the unsigned value) cross-checks random keys.
"""
from __future__ import annotations

import random

import pytest

from kafka_edu.clients.producer.partitioner import DefaultPartitioner, Partitioner, murmur2, to_positive
from kafka_edu.common.cluster import Cluster, Node, PartitionInfo

# (key bytes as hex, signed murmur2 as Java returns it, toPositive(h) % 7) from the JVM
JVM_VECTORS = [
    ("3231", -973932308, 3),
    ("666f6f626172", -790332482, 0),
    ("612d6c6974746c652d6269742d6c6f6e672d737472696e67", -985981536, 1),
    ("612d6c6974746c652d6269742d6c6f6e6765722d737472696e67", -1486304829, 0),
    ("6c6b6a683233346c68396669756839307932336f697568736166756a6861646f66323239706872396831396838396838",
     -58897971, 3),
    ("", 275646681, 2),
    ("61", -1563381124, 5),
    ("6162", 316155434, 0),
    ("616263", 479470107, 4),
    ("61626364", -1323649548, 5),
    ("6162636465", 461995741, 4),
    ("d0bad0bbd18ed187", 2122343024, 4),          # "ключ" in UTF-8: bytes >= 0x80 in every position
    ("6b61666b612d656475", -1911818349, 2),
    ("6f726465722d3432", 501153024, 1),
    (bytes(range(256)).hex(), -1948347274, 3),
    ("fffe80", -160726397, 3),
    ("00000000", 850957120, 6),
    ("00000001", -173113808, 2),
    ("00000002", 1586072243, 0),
    ("00000003", 841864711, 2),
]


@pytest.mark.parametrize("key_hex, expected, partition", JVM_VECTORS, ids=lambda v: str(v)[:12])
def test_murmur2_matches_the_jvm(key_hex, expected, partition):
    h = murmur2(bytes.fromhex(key_hex))
    assert h == expected
    assert to_positive(h) % 7 == partition


def test_kafka_utils_test_vectors():
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971


def test_murmur2_agrees_with_kafka_python_on_random_keys():
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2
    rng = random.Random(20240611)
    for _ in range(3000):
        key = rng.randbytes(rng.randrange(0, 70))
        ours = murmur2(key)
        assert -(2**31) <= ours < 2**31
        assert ours & 0xFFFFFFFF == kafka_python_murmur2(key)


def test_murmur2_accepts_bytearray_and_memoryview():
    assert murmur2(bytearray(b"foobar")) == murmur2(memoryview(b"foobar")) == -790332482


def test_to_positive_clears_only_the_sign_bit():
    assert to_positive(-(2**31)) == 0
    assert to_positive(-1) == 2**31 - 1
    assert to_positive(5) == 5
    assert to_positive(2**31) == 0            # Java's int overflow, for the unbounded counter


def _cluster(leaders: list[bool], topic: str = "t") -> Cluster:
    node = Node(0, "h", 1)
    return Cluster([node], [PartitionInfo(topic, p, node if has_leader else None)
                            for p, has_leader in enumerate(leaders)])


def test_keyed_records_use_murmur2_over_all_partitions_even_leaderless():
    cluster = _cluster([True, False, True])
    partitioner = DefaultPartitioner()
    for key in (b"21", b"foobar", b"abc", b"a-little-bit-long-string"):
        expected = to_positive(murmur2(key)) % 3
        assert partitioner.partition("t", key, key, None, b"v", cluster) == expected
    # "a" hashes to partition 1 (JVM: -1563381124), which has no leader: the keyed choice does not move
    assert partitioner.partition("t", b"a", b"a", None, b"v", cluster) == to_positive(-1563381124) % 3 == 1


def test_keyless_records_alternate_over_available_partitions():
    cluster = _cluster([True, False, True])
    partitioner = DefaultPartitioner(counter_start=0)
    assert [partitioner.partition("t", None, None, None, b"v", cluster) for _ in range(6)] == [0, 2, 0, 2, 0, 2]


def test_keyless_round_robin_covers_every_partition_evenly_from_a_random_start():
    cluster = _cluster([True] * 4)
    starts = {DefaultPartitioner().partition("t", None, None, None, b"v", cluster) for _ in range(40)}
    partitioner = DefaultPartitioner()
    counts = [0] * 4
    for _ in range(400):
        counts[partitioner.partition("t", None, None, None, b"v", cluster)] += 1
    assert counts == [100] * 4
    assert len(starts) > 1                    # fresh partitioners start at different places


def test_keyless_without_any_leader_falls_back_to_all_partitions():
    cluster = _cluster([False, False, False])
    partitioner = DefaultPartitioner(counter_start=7)
    assert [partitioner.partition("t", None, None, None, b"v", cluster) for _ in range(3)] == [1, 2, 0]


def test_counter_wraps_like_a_java_int():
    cluster = _cluster([True] * 3)
    partitioner = DefaultPartitioner(counter_start=2**31 - 1)
    # 2**31-1 -> 2147483647 % 3 = 1; then Java's counter wraps to -2**31, toPositive -> 0
    assert [partitioner.partition("t", None, None, None, b"v", cluster) for _ in range(2)] == [1, 0]


def test_available_partitions_follow_a_new_cluster():
    partitioner = DefaultPartitioner(counter_start=0)
    before = _cluster([True, False, True])
    after = _cluster([False, True, False])
    assert partitioner.partition("t", None, None, None, b"v", before) == 0
    assert {partitioner.partition("t", None, None, None, b"v", after) for _ in range(3)} == {1}


def test_the_base_partitioner_is_abstract():
    with pytest.raises(NotImplementedError):
        Partitioner().partition("t", None, None, None, None, _cluster([True]))
