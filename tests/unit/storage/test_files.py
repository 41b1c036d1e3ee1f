"""File and directory names are Kafka's: 20-digit offsets, and the -future/-delete directories
(a partition directory's own name is the kernel's, tests/unit/common)."""

from __future__ import annotations

from odradek.common.topics import parse_log_directory_name
from odradek.storage import files


def test_offsets_name_files_in_twenty_digits_so_names_sort_as_offsets():
    assert files.offset_file_name(1234, files.LOG_SUFFIX) == "00000000000000001234.log"
    assert files.snapshot_file_name(2**63 - 1) == "9223372036854775807.snapshot".rjust(29, "0")
    names = [files.offset_file_name(n, files.INDEX_SUFFIX) for n in (10, 9, 100)]
    assert sorted(names) == [files.offset_file_name(n, files.INDEX_SUFFIX) for n in (9, 10, 100)]


def test_future_and_delete_directories_are_unique_and_recognised():
    future = files.future_directory_name("orders", 0)
    assert future != files.future_directory_name("orders", 0)
    assert files.parse_future_directory_name(future) == ("orders", 0)
    assert files.parse_future_directory_name("orders-0") is None
    deleted = files.delete_directory_name("orders-0")
    assert deleted.startswith("orders-0.") and deleted.endswith(files.DELETE_DIR_SUFFIX)
    assert parse_log_directory_name(deleted) is None  # not taken for a partition's log
