"""``odradek-operator``'s peering priority: distinct per replica, highest for the oldest."""

from __future__ import annotations

import time

from odradek_operator.__main__ import build_parser, start_priority


def test_an_older_replica_outranks_a_younger_one():
    older = start_priority()
    time.sleep(0.001)
    assert start_priority() < older


def test_priority_can_be_given():
    args = build_parser().parse_args(["--peering", "odradek", "--priority", "100"])
    assert args.priority == 100
    assert build_parser().parse_args([]).priority is None
