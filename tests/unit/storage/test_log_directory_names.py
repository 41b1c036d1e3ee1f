"""A log directory is named only after a legal topic and a partition >= 0: the log manager creates
nothing for ``../x``, ``a/b`` or partition -1 (the fuzz reached it through LeaderAndIsr).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.storage.manager import LogManager


@pytest.mark.parametrize(
    ("topic", "partition"),
    [("../escaped", 0), ("a/b", 0), ("..", 0), ("", 0), ("x" * 250, 0), ("legal", -1)],
)
def test_no_directory_for_an_illegal_name(tmp_path: Path, topic: str, partition: int):
    log_dir = tmp_path / "disk-0"
    manager = LogManager([log_dir])
    manager.load()
    before = sorted(tmp_path.rglob("*"))
    try:
        with pytest.raises(ValueError, match="no log directory"):
            manager.get_or_create_log(topic, partition)
        assert sorted(tmp_path.rglob("*")) == before
    finally:
        manager.shutdown()


def test_a_legal_name_gets_its_directory(tmp_path: Path):
    manager = LogManager([tmp_path / "disk-0"])
    manager.load()
    try:
        manager.get_or_create_log("orders.v2_x-y", 7)
        assert (tmp_path / "disk-0" / "orders.v2_x-y-7").is_dir()
    finally:
        manager.shutdown()
