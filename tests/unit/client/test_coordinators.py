"""One FindCoordinator for groups and transactional ids: the request each version gets, retries
while the coordinator loads, and the errors the ops and Connect have always seen."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from odradek.client import coordinators
from odradek.client.coordinators import TRANSACTION_KEY_TYPE, find_coordinator
from odradek.client.errors import AdminError, ClusterRequestError, UnsupportedByClusterError
from odradek.errors import ErrorCode
from odradek.protocol import schemas


class Client:
    """Answers FindCoordinator at ``version`` with ``codes`` in turn, then node 3."""

    def __init__(self, version: int, codes: list[ErrorCode]):
        self.version = version
        self.codes = list(codes)
        self.broker_addresses: dict[int, tuple[str, int]] = {1: ("a", 9092)}
        self.requests: list[Any] = []

    async def send_any(self, api_key: int, max_version: int, make: Any) -> Any:
        assert (api_key, max_version) == (10, 4)
        self.requests.append(make(schemas.request_schema(api_key, self.version)))
        code = self.codes.pop(0) if self.codes else ErrorCode.none
        answer = SimpleNamespace(error_code=code, node_id=3, host="c", port=9094)
        return SimpleNamespace(coordinators=(answer,)) if self.version >= 4 else answer


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_a_group_is_found_at_any_version_and_its_broker_learned() -> None:
    for version in (0, 1, 4):
        client = Client(version, [])
        assert run(find_coordinator(client, "g")) == 3
        assert client.broker_addresses[3] == ("c", 9094)
        request = client.requests[0]
        if version >= 4:
            assert request.coordinator_keys == ("g",) and request.key_type == 0
        else:
            assert request.key == "g"


def test_a_transactional_id_needs_key_type() -> None:
    client = Client(1, [])
    assert run(find_coordinator(client, "t", TRANSACTION_KEY_TYPE)) == 3
    assert client.requests[0].key_type == TRANSACTION_KEY_TYPE
    with pytest.raises(UnsupportedByClusterError, match="cannot find transaction coordinators"):
        run(find_coordinator(Client(0, []), "t", TRANSACTION_KEY_TYPE))


def test_loading_is_retried_and_other_errors_are_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(coordinators, "COORDINATOR_RETRY_S", 0)
    client = Client(
        4, [ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available]
    )
    assert run(find_coordinator(client, "g")) == 3
    assert len(client.requests) == 3
    client = Client(4, [ErrorCode.group_authorization_failed])
    with pytest.raises(ClusterRequestError, match="no coordinator for group 'g'") as refused:
        run(find_coordinator(client, "g"))
    assert refused.value.error_code == ErrorCode.group_authorization_failed
    assert isinstance(refused.value, AdminError) and len(client.requests) == 1
    client = Client(4, [ErrorCode.transactional_id_authorization_failed])
    with pytest.raises(ClusterRequestError, match="no transaction coordinator for 't'"):
        run(find_coordinator(client, "t", TRANSACTION_KEY_TYPE))


def test_ops_error_is_the_admin_clients_root() -> None:
    from odradek import ops

    assert ops.OpsError is AdminError
    assert issubclass(ops.ClusterUnreachableError, ops.OpsError)
    assert issubclass(ops.PlanError, AdminError)
