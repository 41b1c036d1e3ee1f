"""A broker's ElectLeaders (``broker.admin.leader_election``) against a controller listening on
loopback: v0 is forwarded and answered in v0, the answer waits for the broker's metadata to show
the new leader (REQUEST_TIMED_OUT if it never does, the election made all the same), and with no
controller to answer the request gets REQUEST_TIMED_OUT in time, never an exception."""

from __future__ import annotations

import asyncio
import time
import uuid

from test_leader_balance import T, _broker_1_bounced, _rejoin_isr

from odradek.broker.admin.leader_election import elect_leaders
from odradek.broker.controller_link import ControllerLink
from odradek.broker.metadata_cache import MetadataCache, PartitionMetadata, TopicMetadata
from odradek.cluster.elect_leaders import outcomes_of, request_of
from odradek.cluster.election import ElectionType
from odradek.config.endpoints import HostPort
from odradek.controller.handlers import served
from odradek.controller.server import ControllerServer
from odradek.errors import ErrorCode

STOP_S = 10.0


def _metadata(leaders: dict[int, int]) -> MetadataCache:
    """A broker's cache with topic T: partition -> leader, replicas as ``_broker_1_bounced``."""
    cache = MetadataCache()
    replicas = ((1, 2, 3), (2, 3, 1), (3, 1, 2))
    cache.update_topic(
        TopicMetadata(
            T,
            uuid.uuid4(),
            {
                p: PartitionMetadata(p, leader, 1, replicas[p % 3], replicas[p % 3])
                for p, leader in leaders.items()
            },
        )
    )
    return cache


def _show_leader(cache: MetadataCache, partition: int, leader: int) -> None:
    """What UpdateMetadata from the controller does to the cache."""
    topic = cache.topic(T)
    old = topic.partitions[partition]
    partitions = dict(topic.partitions)
    partitions[partition] = PartitionMetadata(partition, leader, 2, old.replicas, old.isr)
    cache.update_topic(TopicMetadata(T, topic.topic_id, partitions))


def test_forwarded_elections_wait_for_the_brokers_metadata(harness):
    async def scenario():
        await _broker_1_bounced(harness)
        for tp in ((T, 0), (T, 3)):
            await _rejoin_isr(harness, tp, 1)
        server = ControllerServer(served(harness.controller))
        port = await server.start("127.0.0.1", 0)
        stop = asyncio.Event()
        harness.controller.election = None  # run() must not campaign or resign here
        runner = asyncio.ensure_future(harness.controller.run(stop))

        async def find_controller():
            return HostPort("127.0.0.1", port)

        link = ControllerLink(find_controller)
        cache = _metadata({0: 2, 3: 2})
        try:
            # v0, and the broker's metadata never shows the new leader: timed out, yet elected.
            response = await elect_leaders(
                link, cache, request_of(0, ElectionType.PREFERRED, [(T, 0)], 300)
            )
            assert not hasattr(response, "error_code")
            assert outcomes_of(response)[(T, 0)].error is ErrorCode.request_timed_out
            assert harness.state(T, 0)[0].leader == 1
            # v2, and UpdateMetadata arrives while the broker waits: elected.
            asyncio.get_running_loop().call_later(0.1, _show_leader, cache, 3, 1)
            response = await elect_leaders(
                link, cache, request_of(2, ElectionType.PREFERRED, [(T, 3), (T, 1)], 5000)
            )
            assert response.error_code == ErrorCode.none
            assert {tp: o.error for tp, o in outcomes_of(response).items()} == {
                (T, 3): ErrorCode.none,
                (T, 1): ErrorCode.election_not_needed,
            }
        finally:
            await link.close()
            stop.set()
            await asyncio.wait_for(runner, STOP_S)
            await server.stop()

    asyncio.run(scenario())


def test_with_no_controller_the_request_times_out_with_request_timed_out():
    async def scenario():
        async def no_controller():
            return None

        link = ControllerLink(no_controller)
        for version in (0, 1, 2):
            started = time.monotonic()
            response = await elect_leaders(
                link,
                MetadataCache(),
                request_of(version, ElectionType.PREFERRED, [(T, 0)], 200),
                controller_timeout_ms_min=300,
            )
            assert time.monotonic() - started < STOP_S
            if version >= 1:
                assert response.error_code == ErrorCode.request_timed_out
            assert outcomes_of(response)[(T, 0)].error is ErrorCode.request_timed_out
        none_named = await elect_leaders(
            link,
            MetadataCache(),
            request_of(1, ElectionType.UNCLEAN, None, 100),
            controller_timeout_ms_min=100,
        )
        assert none_named.error_code == ErrorCode.request_timed_out
        assert none_named.replica_election_results == ()

    asyncio.run(scenario())


def test_an_unknown_election_type_is_refused_without_asking_the_controller():
    async def scenario():
        asked = []

        async def find_controller():
            asked.append(1)
            return None

        request = request_of(1, ElectionType.PREFERRED, [(T, 0)], 100)
        request = type(request)(
            election_type=2, topic_partitions=request.topic_partitions, timeout=request.timeout
        )
        response = await elect_leaders(ControllerLink(find_controller), MetadataCache(), request)
        assert response.error_code == ErrorCode.invalid_request
        assert outcomes_of(response)[(T, 0)].error is ErrorCode.invalid_request
        assert asked == []

    asyncio.run(scenario())
