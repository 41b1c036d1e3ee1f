"""A connector's transforms in order, each with its optional predicate (Kafka's
TransformationChain and TransformationStage).

A stage applies its transform when it has no predicate, or when the predicate's result differs
from ``negate``; otherwise the record passes unchanged. The chain stops at the first stage that
drops the record (returns ``None``). Used from one task thread; ``close`` closes every transform
and predicate once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from odradek.connect.api import ConnectRecord


@dataclass
class TransformationStage:
    alias: str
    transform: Any
    predicate: Any = None
    negate: bool = False

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if self.predicate is not None and self.predicate.test(record) == self.negate:
            return record
        return self.transform.apply(record)


class TransformationChain:
    def __init__(self, stages: Sequence[TransformationStage] = ()):
        self.stages = list(stages)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        for stage in self.stages:
            record = stage.apply(record)
            if record is None:
                return None
        return record

    def close(self) -> None:
        closed: set[int] = set()
        for stage in self.stages:
            for part in (stage.transform, stage.predicate):
                if part is not None and id(part) not in closed:
                    closed.add(id(part))
                    close = getattr(part, "close", None)
                    if close is not None:
                        close()

    def __len__(self) -> int:
        return len(self.stages)
