"""The APIs and versions this broker serves, and the ApiVersions answers built from them.

``SUPPORTED_VERSIONS`` is the one table: api key -> (min, max), inclusive. Every version in it
must have a schema (checked at import). The ranges are chosen so that kafka-python 3.x, aiokafka,
librdkafka 2.x (confluent-kafka) and Debian's kcat (librdkafka 2.0.2) all find a version they
speak, within what kio 0.6.5 has, and no higher than what the broker implements:

- Produce from 3 and Fetch from 4 (record batch v2 only, as Kafka 4.0); Produce to 11 and Fetch to
  12, the last versions that name topics (Produce 13 and Fetch 13+ carry topic ids instead).
  Produce 12 only adds Kafka 4's transactions v2, which the broker does not implement.
- ListOffsets 1-7: earliest (-2), latest (-1), by timestamp, and max timestamp (-3, v7); v8+ add
  tiered-storage offsets and a timeout.
- Metadata 0-12; 13 only adds a top-level error for a Kafka 4 client feature (rebootstrap).
- InitProducerId 0-4; v5+ belong to Kafka 4's transactions v2 and two-phase commit. The other
  transaction APIs stop where KIP-890 begins (see the table).
- OffsetForLeaderEpoch 2-4 (v2 is librdkafka's KIP-320 version; v3 adds replica_id).
- ApiVersions 0-4 (kio has 4), the admin APIs at kio's full range; ElectLeaders 0-2 too (the
  broker forwards it to the controller's listener, which serves the same range).
- DescribeCluster 0-1 (v2 adds KIP-1073's fenced brokers, which a ZooKeeper cluster has not).
- SaslHandshake 0-1 (v0 is followed by raw SASL tokens, not Kafka requests:
  ``broker.sasl_authenticator``; librdkafka 2.0.2 does SASL only when v0 is advertised),
  SaslAuthenticate 0-2; the SCRAM credential APIs (KIP-554) at v0.
kafka-python infers a broker version from what is advertised (Produce 11 reads as Kafka 3.8) and
turns features on from that: keep that in mind before raising a maximum.

Not served yet (the table grows as the broker learns them): the client quota APIs. The
controller-to-broker APIs (LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown) are not
in kio 0.6.5; ``interbroker`` declares them from Kafka 3.x's schemas, one version each.

The KIP-511 fallback: an ApiVersions request at a version above ours is answered with error 35
(UNSUPPORTED_VERSION) in a v0 body under a v0 response header. Like Kafka
(``ApiVersionsRequest.getErrorResponse``), the body lists only ApiVersions' own range: that is all
a client reads from it before retrying at that version.

Pure data and builders; nothing here mutates state.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from odradek.errors import ErrorCode
from odradek.protocol import (
    interbroker,  # noqa: F401  (importing it registers LeaderAndIsr & co. with schemas)
    schemas,
)

__all__ = [
    "ApiKey",
    "SUPPORTED_VERSIONS",
    "is_supported",
    "build_api_versions_response",
    "api_versions_fallback",
    "client_software_is_valid",
]


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27  # sent by transaction coordinators to partition leaders
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43  # forwarded by brokers to the controller's listener
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45  # forwarded to the controller
    LIST_PARTITION_REASSIGNMENTS = 46  # forwarded to the controller
    OFFSET_DELETE = 47
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50  # KIP-554
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    ALTER_PARTITION = 56  # served by the controller's listener, not by brokers
    DESCRIBE_CLUSTER = 60  # KIP-700
    DESCRIBE_PRODUCERS = 61  # KIP-664
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68  # KIP-848
    CONSUMER_GROUP_DESCRIBE = 69


SUPPORTED_VERSIONS: Mapping[int, tuple[int, int]] = MappingProxyType(
    {
        ApiKey.PRODUCE: (3, 11),
        ApiKey.FETCH: (4, 12),
        ApiKey.LIST_OFFSETS: (1, 7),
        ApiKey.METADATA: (0, 12),
        # Controller <-> broker, one version each (interbroker: Kafka 3.9's highest).
        ApiKey.LEADER_AND_ISR: (7, 7),
        ApiKey.STOP_REPLICA: (4, 4),
        ApiKey.UPDATE_METADATA: (8, 8),
        ApiKey.CONTROLLED_SHUTDOWN: (3, 3),
        ApiKey.FIND_COORDINATOR: (0, 5),  # v6 only adds share groups (KIP-932)
        # The group APIs (served once their handler module exists): v10 of OffsetCommit and
        # OffsetFetch name topics by id, and DescribeGroups v6 adds KIP-1043's fields.
        ApiKey.OFFSET_COMMIT: (2, 9),
        ApiKey.OFFSET_FETCH: (1, 9),
        ApiKey.JOIN_GROUP: (0, 9),
        ApiKey.HEARTBEAT: (0, 4),
        ApiKey.LEAVE_GROUP: (0, 5),
        ApiKey.SYNC_GROUP: (0, 5),
        ApiKey.DESCRIBE_GROUPS: (0, 5),
        ApiKey.LIST_GROUPS: (0, 5),
        ApiKey.DELETE_GROUPS: (0, 2),
        ApiKey.OFFSET_DELETE: (0, 0),
        # v4 only adds TRANSACTION_ABORTABLE (KIP-890 verification, not done); v5 is part 2.
        ApiKey.TXN_OFFSET_COMMIT: (0, 3),
        ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
        ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
        ApiKey.API_VERSIONS: (0, 4),
        # KIP-599's strict versions (THROTTLING_QUOTA_EXCEEDED per topic) are honoured: CreateTopics
        # 6+, DeleteTopics 5+ and CreatePartitions 3+ (broker.mutation_quota).
        ApiKey.CREATE_TOPICS: (2, 7),
        ApiKey.DELETE_TOPICS: (1, 6),
        ApiKey.DELETE_RECORDS: (0, 2),
        ApiKey.INIT_PRODUCER_ID: (0, 4),
        # The transaction coordinator (transaction version 1): AddPartitionsToTxn v4+ is the
        # broker-to-broker verification (KIP-890 part 1), AddOffsetsToTxn v4 and EndTxn v4 only
        # add TRANSACTION_ABORTABLE, EndTxn v5 the epoch bump per transaction (part 2), and
        # ListTransactions v2 a transactional id pattern: none of them is implemented.
        ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
        ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
        ApiKey.END_TXN: (0, 3),
        ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
        ApiKey.LIST_TRANSACTIONS: (0, 1),
        ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
        # v1 is what coordinators send (kio has no v0); v2 carries KIP-890 part 2's transaction
        # version, not implemented.
        ApiKey.WRITE_TXN_MARKERS: (1, 1),
        # kio starts the ACL APIs at v1 (v0 knew LITERAL patterns only, before KIP-290).
        ApiKey.DESCRIBE_ACLS: (1, 3),
        ApiKey.CREATE_ACLS: (1, 3),
        ApiKey.DELETE_ACLS: (1, 3),
        ApiKey.DESCRIBE_CONFIGS: (1, 4),
        ApiKey.ALTER_CONFIGS: (0, 2),
        # v0 is the same as v1 on the wire, but kio starts at v1; v5 adds KIP-1066's cordoned
        # dirs, which Odradek does not have.
        ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
        ApiKey.ALTER_REPLICA_LOG_DIRS: (1, 2),  # kio's (v0 is v1 without throttling semantics)
        ApiKey.CREATE_PARTITIONS: (0, 3),
        ApiKey.ELECT_LEADERS: (0, 2),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),  # v1: KIP-860's flag, honoured
        ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
        ApiKey.DESCRIBE_CLUSTER: (0, 1),
        ApiKey.DESCRIBE_PRODUCERS: (0, 0),  # KIP-664; the only version
        # v0 is followed by raw SASL tokens outside Kafka's framing (broker.sasl_authenticator)
        ApiKey.SASL_HANDSHAKE: (0, 1),
        ApiKey.SASL_AUTHENTICATE: (0, 2),  # v1 adds session_lifetime_ms (KIP-368)
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
        ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
        ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    }
)


def _check_table() -> None:
    for api_key, (lowest, highest) in SUPPORTED_VERSIONS.items():
        missing = set(range(lowest, highest + 1)) - schemas.known_versions(api_key)
        if lowest > highest or missing:
            raise RuntimeError(f"api key {api_key}: no schema for versions {sorted(missing)}")


_check_table()


def is_supported(
    api_key: int, api_version: int, table: Mapping[int, tuple[int, int]] = SUPPORTED_VERSIONS
) -> bool:
    """Whether ``table`` (the broker's, unless a server with its own passes it) serves it."""
    versions = table.get(api_key)
    return versions is not None and versions[0] <= api_version <= versions[1]


def _response_module_types(version: int) -> tuple[type[Any], type[Any]]:
    response_type = schemas.response_schema(ApiKey.API_VERSIONS, version)
    entry_type = response_type.__dataclass_fields__["api_keys"].type.__args__[0]
    return response_type, entry_type


def build_api_versions_response(
    version: int,
    error_code: ErrorCode = ErrorCode.none,
    *,
    throttle_time_ms: int = 0,
    versions: Mapping[int, tuple[int, int]] = SUPPORTED_VERSIONS,
) -> Any:
    """An ApiVersionsResponse body of ``version`` listing ``versions``, sorted by api key.

    Tagged fields (features, v3+) keep their defaults, so none is written.
    """
    response_type, entry_type = _response_module_types(version)
    entries = tuple(
        entry_type(api_key=api_key, min_version=lowest, max_version=highest)
        for api_key, (lowest, highest) in sorted(versions.items())
    )
    fields: dict[str, Any] = {"error_code": error_code, "api_keys": entries}
    if "throttle_time" in response_type.__dataclass_fields__:
        fields["throttle_time"] = timedelta(milliseconds=throttle_time_ms)
    return response_type(**fields)


def api_versions_fallback() -> Any:
    """The KIP-511 answer to an ApiVersions request at a version we do not serve (v0 body)."""
    return build_api_versions_response(
        0,
        ErrorCode.unsupported_version,
        versions={ApiKey.API_VERSIONS: SUPPORTED_VERSIONS[ApiKey.API_VERSIONS]},
    )


# Kafka's rule for ApiVersions v3+ ClientSoftwareName/Version (else INVALID_REQUEST).
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def client_software_is_valid(request: Any) -> bool:
    """False if an ApiVersions v3+ request names its client as Kafka refuses to accept."""
    if request.__version__ < 3:
        return True
    return bool(
        _SOFTWARE.fullmatch(request.client_software_name)
        and _SOFTWARE.fullmatch(request.client_software_version)
    )
