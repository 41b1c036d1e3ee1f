"""The consume-transform-produce loop with kafka-python's and aiokafka's transactional producers:
one worker process reads an input topic with ``read_committed`` and writes it transformed, one
transaction per batch with its offsets; it is killed (kill -9) once mid-way and restarted with
the same transactional id (which aborts its open transaction). The output read with
``read_committed`` holds every input record exactly once. (confluent-kafka's run, with broker
faults, is ``test_exactly_once``.)"""

from __future__ import annotations

import pytest
from txn_proof.traffic import committed, create_topic, exactly_once, fill, read_all
from txn_proof.workers import Workers

from support.proof_lookups import end_offsets
from support.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.fault]

PARTITIONS = 3
RECORDS = 600
WAIT_S = 90.0


@pytest.mark.timeout(180)
@pytest.mark.parametrize("library", ["kafka-python", "aiokafka"])
def test_consume_transform_produce_exactly_once(txn_cluster, unique, tmp_path, library):
    bootstrap = txn_cluster.bootstrap_servers
    source, output, group = unique("input"), unique("output"), unique("group")
    create_topic(bootstrap, source, PARTITIONS)
    create_topic(bootstrap, output, PARTITIONS)
    inputs = fill(bootstrap, source, RECORDS, PARTITIONS)
    ends = end_offsets(inputs)
    workers = Workers(bootstrap, group, source, output, tmp_path, library=library)

    def supervised(condition):
        def check():
            workers.supervise()
            return condition()

        return check

    try:
        worker = workers.start(batch=30, process_ms=10)
        wait_until(
            supervised(lambda: len(workers.events("committed")) >= 3),
            "three committed transactions",
            WAIT_S,
        )
        workers.kill(worker)  # mid-way, likely inside a transaction
        workers.restart(worker)
        wait_until(
            supervised(lambda: committed(bootstrap, group, source, PARTITIONS) == ends),
            "the group's offsets committed to the input's end",
            WAIT_S,
        )
        for happened in workers.stop_all():
            print(happened, flush=True)
    except BaseException:
        print(workers.tails(), flush=True)
        raise
    finally:
        workers.close()

    judgement = exactly_once(inputs, read_all(bootstrap, output, PARTITIONS, "read_committed"))
    print(judgement.report(), flush=True)
    assert judgement.exactly_once, judgement.report()
