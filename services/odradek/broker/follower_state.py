"""What a partition's leader knows about each follower: how far it has fetched, and when it was
last caught up (Kafka's ``Replica`` state on the leader).

A follower's log end offset is the fetch offset of its last fetch: a follower asks for offset X
only once it holds everything below X. Until its first fetch under this leader the offset is
unknown (-1), and the high watermark does not count on it.

"Caught up" follows Kafka's ``Replica.updateFetchStateOrThrow``: a fetch at or beyond the leader's
log end offset at that moment means caught up now; a fetch at or beyond the leader's log end
offset *of the previous fetch* means it was caught up when the previous fetch was served (it has
since copied everything that fetch returned). A follower in the ISR that has not been caught up
for ``replica.lag.time.max.ms`` is out of sync and leaves the ISR.

Runs on the broker's event loop only.
"""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN_OFFSET = -1


@dataclass(slots=True)
class FollowerState:
    replica_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0

    def record_fetch(self, fetch_offset: int, leader_log_end_offset: int, now_ms: int) -> None:
        """A fetch at ``fetch_offset`` arrived while the leader's log ended at the given offset."""
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset >= 0:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        self.last_fetch_time_ms = now_ms

    def lag_ms(self, now_ms: int) -> int:
        return max(now_ms - self.last_caught_up_time_ms, 0)

    def is_caught_up(self, now_ms: int, lag_time_max_ms: int) -> bool:
        return self.lag_ms(now_ms) <= lag_time_max_ms

    def reset(self, now_ms: int, in_isr: bool) -> None:
        """A new leadership: nothing known yet; an ISR member counts as caught up from now, so
        it is given ``replica.lag.time.max.ms`` to fetch before it is dropped."""
        self.log_end_offset = UNKNOWN_OFFSET
        self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
        self.last_fetch_time_ms = 0
        self.last_caught_up_time_ms = now_ms if in_isr else 0
