"""The Spark application test_k8s_submit.py submits in cluster mode: its executors produce records.

``k8s_submit_app.py BOOTSTRAP TOPIC COUNT``: COUNT records (key ``k<i>``, value ``v<i>``) produced
to TOPIC by the executors' tasks (two partitions of the range), each task with its own idempotent
producer; the driver prints ``produced <n>``. The executors import ``odradek.spark`` first, as a
job reading with the data source would.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

FLUSH_TIMEOUT_S = 30


def main(argv: list[str]) -> None:
    from pyspark import SparkContext

    bootstrap, topic, count = argv[0], argv[1], int(argv[2])

    def produce(numbers: Iterator[int]) -> Iterator[int]:
        import confluent_kafka

        import odradek.spark  # noqa: F401  (the package is importable in the executor)

        producer = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True}
        )
        produced = 0
        for i in numbers:
            producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
            produced += 1
        if producer.flush(FLUSH_TIMEOUT_S):
            raise RuntimeError(f"records left unsent after {FLUSH_TIMEOUT_S} s")
        yield produced

    # A bare SparkContext: no SQL session to start, the pods are what is tested.
    context = SparkContext.getOrCreate()
    try:
        total = context.parallelize(range(count), 2).mapPartitions(produce).sum()
        print(f"produced {total}", flush=True)
    finally:
        context.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
