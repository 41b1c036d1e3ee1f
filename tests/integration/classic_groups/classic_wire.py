"""Raw classic-group requests through the project's client (``odradek.client``), for the
tests: build a JoinGroup/SyncGroup/Heartbeat/LeaveGroup of any version and send it to the
group's coordinator, retrying while the coordinator loads (bounded)."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

from odradek.client.connection import BrokerConnection
from odradek.errors import ErrorCode
from odradek.protocol import schemas

FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 10, 11, 12, 13, 14
TIMEOUT_S = 30.0
RETRIABLE = {
    ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.not_coordinator,
}


def address(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return host, int(port)


async def send(where: tuple[str, int], request: Any) -> Any:
    connection = await BrokerConnection.open(*where)
    try:
        return await connection.send(request, timeout_s=TIMEOUT_S)
    finally:
        await connection.close()


def call(where: tuple[str, int], request: Any) -> Any:
    return asyncio.run(send(where, request))


def call_retrying(where: tuple[str, int], request: Any, deadline_s: float = 30.0) -> Any:
    """``request`` again while the answer is a coordinator error (the topic being created or
    loaded), up to ``deadline_s``."""
    deadline = time.monotonic() + deadline_s
    while True:
        response = call(where, request)
        if response.error_code not in RETRIABLE or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def coordinator(bootstrap: str, group: str) -> tuple[str, int]:
    """The group's coordinator (FindCoordinator v3), once there is one."""
    request = schemas.request_schema(FIND_COORDINATOR, 3)(key=group, key_type=0)
    found = call_retrying(address(bootstrap), request, 60.0)
    assert found.error_code == ErrorCode.none, found
    return found.host, found.port


def field_type(request_type: type, name: str) -> type:
    return request_type.__dataclass_fields__[name].type.__args__[0]


def join(
    group: str,
    member_id: str = "",
    *,
    version: int = 5,
    instance: str | None = None,
    session_ms: int = 10_000,
    rebalance_ms: int = 10_000,
    protocols: tuple[tuple[str, bytes], ...] = (("range", b"\x00\x01opaque"),),
    protocol_type: str = "consumer",
) -> Any:
    request_type = schemas.request_schema(JOIN_GROUP, version)
    protocol = field_type(request_type, "protocols")
    values: dict[str, Any] = {
        "group_id": group,
        "session_timeout": timedelta(milliseconds=session_ms),
        "rebalance_timeout": timedelta(milliseconds=rebalance_ms),
        "member_id": member_id,
        "group_instance_id": instance,
        "protocol_type": protocol_type,
        "protocols": tuple(protocol(name=n, metadata=m) for n, m in protocols),
        "reason": None,
    }
    fields = request_type.__dataclass_fields__
    return request_type(**{k: v for k, v in values.items() if k in fields})


def sync(
    group: str,
    generation: int,
    member_id: str,
    assignments: dict[str, bytes] | None = None,
    *,
    version: int = 3,
    instance: str | None = None,
) -> Any:
    request_type = schemas.request_schema(SYNC_GROUP, version)
    entry = field_type(request_type, "assignments")
    values: dict[str, Any] = {
        "group_id": group,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": instance,
        "assignments": tuple(
            entry(member_id=m, assignment=a) for m, a in (assignments or {}).items()
        ),
    }
    if version >= 5:
        values.update(protocol_type="consumer", protocol_name="range")
    fields = request_type.__dataclass_fields__
    return request_type(**{k: v for k, v in values.items() if k in fields})


def heartbeat(
    group: str, generation: int, member_id: str, *, version: int = 3, instance: str | None = None
) -> Any:
    request_type = schemas.request_schema(HEARTBEAT, version)
    values = {
        "group_id": group,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": instance,
    }
    fields = request_type.__dataclass_fields__
    return request_type(**{k: v for k, v in values.items() if k in fields})


def leave(group: str, *members: tuple[str, str | None], version: int = 3) -> Any:
    request_type = schemas.request_schema(LEAVE_GROUP, version)
    if version < 3:
        ((member_id, _),) = members
        return request_type(group_id=group, member_id=member_id)
    identity = field_type(request_type, "members")
    values = [{"member_id": m, "group_instance_id": i, "reason": "test"} for m, i in members]
    fields = identity.__dataclass_fields__
    return request_type(
        group_id=group,
        members=tuple(identity(**{k: v for k, v in m.items() if k in fields}) for m in values),
    )
