"""The broker's open-files limit and the replica budget derived from it.

Every replica a broker hosts holds files open for as long as it is hosted, so the open-files
limit (``RLIMIT_NOFILE``) bounds the replicas a broker can serve. Past it every ``open`` fails
with EMFILE, log dirs go offline and a restart fails the same way in log recovery: a topic
that does not fit must be refused before it is written, which needs the bound as a number.

At start the broker raises its soft limit to the hard one (``raise_open_files_limit``), then
derives its budget (``replica_budget``)::

    budget = (limit - reserved) // FILES_PER_REPLICA        (at most max.broker.partitions)

``FILES_PER_REPLICA`` counts what one replica really holds open once loaded: its active
segment's ``.log``, and nothing else. As Kafka's ``LazyIndex``, its other files are opened for
a use and closed: the ``.index`` and ``.timeindex`` (``storage.index``: a roll, a lookup in an
older segment, a flush), the ``.txnindex`` (``storage.txn_index``: an aborted transaction, a
flush), the partition directory for the leader-epoch checkpoint (``storage.leader_epoch``: a
write at a new leader epoch), producer-state snapshots. The active indexes' entry writes go
through descriptors of a pool shared by all replicas (``storage.index.WRITE_DESCRIPTORS_MAX``,
128, the partitions written most recently). ``tests/unit/broker/test_replica_budget.py`` counts
a loaded replica's descriptors in ``/proc/self/fd`` against this figure.

``reserved`` (``odradek.open.files.reserved``, default a quarter of the limit) is for what the
count leaves out: connections, the interpreter, that pool, the transient opens (a storage
thread holds a few at a time: a leader-epoch checkpoint's write two, a flush up to four for
each of ``FSYNC_BATCH_SEGMENTS`` segments), and the ``.log`` of inactive segments, which stay
open for ``sendfile`` (one per segment: the count assumes the one segment of a partition below
``segment.bytes``, the case of thousands of small partitions; a broker whose partitions have
many segments each needs a larger reserve).

The budget is written in the broker's registration (``zk.paths.BrokerInfo``), where
``broker.admin.topics`` reads it to refuse CreateTopics/CreatePartitions the cluster could not
hold (POLICY_VIOLATION). Pure functions, except the two that read or set the process's limit.
"""

from __future__ import annotations

import logging
import resource
from dataclasses import dataclass

log = logging.getLogger(__name__)

# the active segment's .log; every other file of a replica is opened on demand (docstring)
FILES_PER_REPLICA = 1
RESERVED_FRACTION = 4  # reserved files default to limit // RESERVED_FRACTION
DERIVED = -1  # max.broker.partitions / odradek.open.files.reserved: derive from the limit


@dataclass(frozen=True, slots=True)
class OpenFilesLimit:
    soft_before: int
    soft: int
    hard: int  # resource.RLIM_INFINITY for no limit


def raise_open_files_limit(test_limit: int = DERIVED) -> OpenFilesLimit:
    """Raise the soft RLIMIT_NOFILE to the hard limit and log both; return the limits.

    ``test_limit`` (``odradek.test.open.files.limit``, tests only) first lowers both limits to
    that value, so a test reaches the limit with a few hundred files instead of tens of
    thousands.
    """
    soft_before, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if test_limit != DERIVED:
        hard = test_limit if hard == resource.RLIM_INFINITY else min(hard, test_limit)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft_before, hard), hard))
    soft = soft_before if test_limit == DERIVED else min(soft_before, hard)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as e:  # e.g. RLIM_INFINITY above the kernel's nr_open
            log.warning("could not raise the open-files limit from %d to %d: %s", soft, hard, e)
    log.info("open-files limit (RLIMIT_NOFILE): soft %d -> %d, hard %d", soft_before, soft, hard)
    return OpenFilesLimit(soft_before, soft, hard)


def replica_budget(
    open_files: int, *, reserved: int = DERIVED, max_broker_partitions: int = DERIVED
) -> int:
    """Replicas a broker with ``open_files`` descriptors can host (see the module docstring)."""
    if reserved == DERIVED:
        reserved = open_files // RESERVED_FRACTION
    budget = max(open_files - reserved, 0) // FILES_PER_REPLICA
    if max_broker_partitions != DERIVED:
        budget = min(budget, max_broker_partitions)
    return budget


def over_budget_message(hosted: int, budget: int, open_files: int) -> str:
    """What a broker logs when it finds more replicas on disk than its budget."""
    files = f"{FILES_PER_REPLICA} file{'' if FILES_PER_REPLICA == 1 else 's'}"
    return (
        f"this broker hosts {hosted} replicas but its replica budget is {budget} (open-files "
        f"limit {open_files} at {files} a replica, max.broker.partitions): "
        f"raise the hard RLIMIT_NOFILE or move replicas away (kafka-reassign-partitions); "
        f"the rest stay on disk, unloaded, and new replicas are refused meanwhile"
    )
