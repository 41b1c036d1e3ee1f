"""The requests one controller event decides, gathered and sent when the event is done.

Kafka's ``ControllerBrokerRequestBatch``: the state machines say which broker must hear about
which partition while they change states; ``send`` then builds each request once from the model
(so it carries the states as they are after every write of the event) and queues it on the
channel, in Kafka's order for one broker: LeaderAndIsr (a broker learns its role before its
clients are told), StopReplica, then UpdateMetadata. A partition named twice for a broker is sent
once; ``is_new`` sticks once any transition asked for it (Kafka's NewReplica).

Used by the controller's event loop only; a batch lives for one event.
"""

from __future__ import annotations

from collections.abc import Iterable

from odradek.common.partitions import TopicPartition
from odradek.config.endpoints import CONTROL_PLANE_LISTENER_NAME
from odradek.controller import requests
from odradek.controller.model import ClusterModel
from odradek.controller.ports import Channel


class RequestBatch:
    def __init__(
        self,
        model: ClusterModel,
        controller_id: int,
        *,
        control_plane_listener_name: str = CONTROL_PLANE_LISTENER_NAME,
    ):
        self.model = model
        self.controller_id = controller_id
        self.control_plane_listener_name = control_plane_listener_name
        self._clear()

    def _clear(self) -> None:
        self.leader_and_isr: dict[int, dict[TopicPartition, bool]] = {}
        self.update_metadata_brokers: set[int] = set()
        self.update_metadata_wanted = False  # even with no partition: the live brokers changed
        self.update_metadata_partitions: dict[TopicPartition, None] = {}  # ordered set
        self.deleted_partitions: dict[TopicPartition, None] = {}
        self.stop_replica: dict[int, dict[TopicPartition, bool]] = {}  # -> delete_partition

    def add_leader_and_isr(
        self, brokers: Iterable[int], tp: TopicPartition, *, new: bool = False
    ) -> None:
        """LeaderAndIsr for ``tp`` to each of ``brokers`` that is live (others get the full
        state when they return)."""
        for broker_id in brokers:
            if broker_id in self.model.brokers:
                mine = self.leader_and_isr.setdefault(broker_id, {})
                mine[tp] = mine.get(tp, False) or new

    def add_update_metadata(
        self, brokers: Iterable[int], partitions: Iterable[TopicPartition]
    ) -> None:
        self.update_metadata_brokers.update(b for b in brokers if b in self.model.brokers)
        self.update_metadata_partitions.update(dict.fromkeys(partitions))
        self.update_metadata_wanted = True

    def add_deleted_partitions(
        self, brokers: Iterable[int], partitions: Iterable[TopicPartition]
    ) -> None:
        """UpdateMetadata with leader -2 for ``partitions``: caches forget them (deletion)."""
        self.update_metadata_brokers.update(b for b in brokers if b in self.model.brokers)
        self.deleted_partitions.update(dict.fromkeys(partitions))

    def add_stop_replica(self, broker_id: int, tp: TopicPartition, *, delete: bool = True) -> None:
        """StopReplica for ``tp`` to ``broker_id``; ``delete``: its log goes too (a deletion),
        else the broker only stops hosting it (Kafka's OfflineReplica). A delete sticks."""
        if broker_id in self.model.brokers:
            mine = self.stop_replica.setdefault(broker_id, {})
            mine[tp] = mine.get(tp, False) or delete

    def add_full_state(self, leader_and_isr_to: Iterable[int]) -> None:
        """UpdateMetadata of every partition to every live broker; LeaderAndIsr of its
        partitions to each of ``leader_and_isr_to`` (a controller elected, brokers arrived)."""
        model = self.model
        with_state = [tp for tp in model.partitions() if tp in model.states]
        self.add_update_metadata(model.brokers, with_state)
        for broker_id in leader_and_isr_to:
            for tp in with_state:
                if broker_id in model.replicas(tp):
                    self.add_leader_and_isr([broker_id], tp)

    def send(self, channel: Channel) -> None:
        model = self.model
        for broker_id, partitions in sorted(self.leader_and_isr.items()):
            for new in (True, False):
                chosen = [tp for tp, is_new in partitions.items() if is_new is new]
                if chosen:
                    channel.send(
                        broker_id,
                        requests.leader_and_isr(
                            model,
                            self.controller_id,
                            broker_id,
                            chosen,
                            new=new,
                            control_plane_listener_name=self.control_plane_listener_name,
                        ),
                    )
        for broker_id, stopped in sorted(self.stop_replica.items()):
            for delete in (True, False):
                chosen = [tp for tp, deleting in stopped.items() if deleting is delete]
                if chosen:
                    channel.send(
                        broker_id,
                        requests.stop_replica(
                            model, self.controller_id, broker_id, chosen, delete=delete
                        ),
                    )
        for partitions, deleted in (
            (list(self.deleted_partitions), True),
            ([tp for tp in self.update_metadata_partitions if tp in model.states], False),
        ):
            if not partitions and (deleted or not self.update_metadata_wanted):
                continue
            request = requests.update_metadata(
                model, self.controller_id, partitions, deleted=deleted
            )
            for broker_id in sorted(self.update_metadata_brokers):
                if broker_id in model.brokers:
                    channel.send(broker_id, requests.addressed_to(request, model, broker_id))
        self._clear()  # one batch may be sent several times within an event
