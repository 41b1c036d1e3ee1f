"""The admin client: connections to a cluster, one to any bootstrap broker, one per broker id.

What every administrative caller of a cluster shares: the cluster operations (``odradek.ops``:
reassignments, groups, transactions), the Kubernetes operator through them, and Connect's
distributed workers (their group membership).

``ClusterClient`` opens connections (Odradek's own ``BrokerConnection``) on demand and closes
them all on exit. ``send_any`` sends to any broker (the first bootstrap address that answers;
on a lost connection it tries the next one, each address at most once per call);
``send_to(broker_id, ...)`` sends to one broker, found in the last Metadata answer (what
Kafka's admin client does for DescribeLogDirs and for BROKER config resources).

Requests are kio dataclasses built for the version both sides speak (``build``): the caller
gives the highest version it wants and the fields, ``build`` keeps the fields that version has.
An API the broker does not serve is ``UnsupportedByClusterError``; a connection that cannot be
made, ``ClusterUnreachableError`` (a refused SASL exchange too); both are ``AdminError``s
(``errors``). With ``security``, every
connection is over TLS and/or authenticates with SASL PLAIN or SCRAM (``client.security``).
Every request is bounded by ``request_timeout_s``.

One client belongs to one event loop and one task at a time (the operations are sequential);
it is not thread-safe. ``find_coordinator`` (``coordinators``) finds a group's or a
transactional id's coordinator through it.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.alter_partition_reassignments.v0.request import (
    AlterPartitionReassignmentsRequest,
)
from kio.schema.describe_log_dirs.v1.request import DescribeLogDirsRequest
from kio.schema.incremental_alter_configs.v0.request import IncrementalAlterConfigsRequest
from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest
from kio.schema.metadata.v1.request import MetadataRequest

from odradek.client.connection import DEFAULT_REQUEST_TIMEOUT_S, BrokerConnection
from odradek.client.errors import (
    ClientError,
    ClusterUnreachableError,
    ConnectionClosedError,
    NoCommonVersionError,
    RequestTimeoutError,
    UnsupportedByClusterError,
)
from odradek.client.security import ClientSecurity, authenticate
from odradek.protocol import schemas

__all__ = ["ClusterClient", "api_name", "build", "element_type", "parse_bootstrap"]

# The APIs the cluster operations use, keyed as kio's schemas key them (Kafka's api keys).
METADATA = MetadataRequest.__api_key__  # 3
DESCRIBE_LOG_DIRS = DescribeLogDirsRequest.__api_key__  # 35
INCREMENTAL_ALTER_CONFIGS = IncrementalAlterConfigsRequest.__api_key__  # 44
ALTER_PARTITION_REASSIGNMENTS = AlterPartitionReassignmentsRequest.__api_key__  # 45
LIST_PARTITION_REASSIGNMENTS = ListPartitionReassignmentsRequest.__api_key__  # 46

CONNECT_TIMEOUT_S = 10.0
CLIENT_ID = "odradek-ops"


def api_name(api_key: int) -> str:
    """Kafka's name of an API ("AlterPartitionReassignments"), from kio's schemas."""
    version = min(schemas.known_versions(api_key), default=None)
    if version is None:
        return f"api key {api_key}"
    return schemas.request_schema(api_key, version).__name__.removesuffix("Request")


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9092"`` -> [(host, port), ...]; a ``ValueError`` says what is wrong."""
    addresses = []
    for part in bootstrap.split(","):
        host, sep, port = part.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bootstrap address {part.strip()!r} is not HOST:PORT")
        addresses.append((host.strip("[]"), int(port)))
    return addresses


def element_type(dataclass_type: type[Any], field_name: str) -> type[Any]:
    """The dataclass inside a kio field typed ``tuple[X, ...]`` (or ``... | None``): X."""
    pending = [dataclass_type.__dataclass_fields__[field_name].type]
    while pending:
        hint = pending.pop()
        if dataclasses.is_dataclass(hint):
            return hint  # type: ignore[return-value]
        pending.extend(typing.get_args(hint))
    raise TypeError(f"{dataclass_type.__name__}.{field_name} holds no dataclass")


def build(request_type: type[Any], **fields: Any) -> Any:
    """``request_type(**fields)`` keeping only the fields this version has."""
    known = request_type.__dataclass_fields__
    return request_type(**{k: v for k, v in fields.items() if k in known})


class ClusterClient:
    """See the module docstring. ``async with ClusterClient(bootstrap) as client: ...``"""

    def __init__(
        self,
        bootstrap: str,
        *,
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        security: ClientSecurity | None = None,
        client_id: str = CLIENT_ID,
    ):
        self.addresses = parse_bootstrap(bootstrap)
        self.client_id = client_id
        self.security = security or ClientSecurity()  # for every connection
        self.request_timeout_s = request_timeout_s
        self.broker_addresses: dict[int, tuple[str, int]] = {}
        self._any: BrokerConnection | None = None
        self._next_address = 0
        self._by_id: dict[int, BrokerConnection] = {}

    async def __aenter__(self) -> ClusterClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        connections = [c for c in (self._any, *self._by_id.values()) if c is not None]
        self._any, self._by_id = None, {}
        for connection in connections:
            await connection.close()

    # -- sending -------------------------------------------------------------------------------

    async def send_any(
        self, api_key: int, max_version: int, make: Callable[[type[Any]], Any]
    ) -> Any:
        """Send ``make(request_type)`` to any broker at the highest version up to ``max_version``
        that it serves; the response dataclass."""
        last: ClientError | None = None
        for _ in range(len(self.addresses)):
            connection = await self._any_connection()
            try:
                return await self._send(connection, api_key, max_version, make)
            except (ConnectionClosedError, RequestTimeoutError) as e:
                last = e
                self._any = None
                await connection.close()
        raise ClusterUnreachableError(f"no broker answered {api_name(api_key)}: {last}") from last

    async def send_to(
        self, broker_id: int, api_key: int, max_version: int, make: Callable[[type[Any]], Any]
    ) -> Any:
        """Send to broker ``broker_id`` (known from the last Metadata answer)."""
        connection = self._by_id.get(broker_id)
        if connection is None or connection.closed:
            if broker_id not in self.broker_addresses:
                raise ClusterUnreachableError(f"broker {broker_id} is not in the cluster metadata")
            host, port = self.broker_addresses[broker_id]
            connection = await self.open_connection(host, port)
            self._by_id[broker_id] = connection
        try:
            return await self._send(connection, api_key, max_version, make)
        except (ConnectionClosedError, RequestTimeoutError) as e:
            self._by_id.pop(broker_id, None)
            raise ClusterUnreachableError(f"broker {broker_id}: {e}") from e

    def learn_brokers(self, addresses: Mapping[int, tuple[str, int]]) -> None:
        self.broker_addresses = dict(addresses)

    async def _send(
        self,
        connection: BrokerConnection,
        api_key: int,
        max_version: int,
        make: Callable[[type[Any]], Any],
    ) -> Any:
        try:
            version = connection.pick_version(api_key, max_version)
        except NoCommonVersionError as e:
            raise UnsupportedByClusterError(
                f"the cluster does not serve {api_name(api_key)}: {e}"
            ) from e
        request = make(schemas.request_schema(api_key, version))
        return await connection.send(request, timeout_s=self.request_timeout_s)

    async def _any_connection(self) -> BrokerConnection:
        if self._any is not None and not self._any.closed:
            return self._any
        errors = []
        for _ in range(len(self.addresses)):
            host, port = self.addresses[self._next_address % len(self.addresses)]
            self._next_address += 1
            try:
                self._any = await self.open_connection(host, port)
                return self._any
            except ClusterUnreachableError as e:
                errors.append(str(e))
        raise ClusterUnreachableError("; ".join(errors))

    async def open_connection(self, host: str, port: int) -> BrokerConnection:
        """A new connection to ``host:port``, versions negotiated and secured as every other
        (the caller owns and closes it: a group member's connection to its coordinator)."""
        try:
            connection = await BrokerConnection.open(
                host,
                port,
                client_id=self.client_id,
                connect_timeout_s=CONNECT_TIMEOUT_S,
                request_timeout_s=self.request_timeout_s,
                tls=self.security.tls,
            )
        except ClientError as e:
            raise ClusterUnreachableError(str(e)) from e
        try:
            await connection.negotiate_versions()
        except ClientError as e:
            await connection.close()
            raise ClusterUnreachableError(f"{host}:{port}: ApiVersions failed: {e}") from e
        if self.security.sasl is not None:
            try:
                await authenticate(connection, self.security.sasl)
            except ClientError as e:
                await connection.close()
                raise ClusterUnreachableError(f"{host}:{port}: {e}") from e
        return connection
