"""The tests keep their shared shape: waits come from ``support.waiting`` and consume loops from
``support.consuming`` (no local poll helpers but the few adapters listed here, and no inline
``time.monotonic() + ...`` deadline but in the functions listed here, each with its reason), and no
test edits ``sys.path`` (the helper folders are on pytest's ``pythonpath`` in pyproject.toml)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
WAIT_NAMES = {"wait_for", "_wait", "eventually", "wait_until", "_wait_until", "until", "poll_until"}
# (file, function): why it is not simply support.waiting.
WAIT_ADAPTERS = {
    ("support/waiting.py", "wait_until"): "the one home",
    ("support/k8s_operator.py", "wait_for"): "the operator tests' argument order, over the home",
    ("support/connect_workers.py", "wait_for"): "ends at once when a worker process exits",
    ("replication/proof/clusters.py", "wait_until"): "the proofs' bound by default, over the home",
    ("unit/broker/test_txn_marker_sender.py", "wait_for"): "awaits an asyncio.Event, no polling",
    ("spark/test_write.py", "wait_for"): "one deadline across the waits of a driver it kills",
}


# (file, function) that computes a ``time.monotonic() + ...`` deadline itself: why it is not a
# support.waiting wait or a support.consuming read. A plain poll (look, sleep, look again until
# true) belongs in wait_until; a read of "count records or time's up" in poll_messages/records.
_HOME = "the one home of its kind"
_TO_THE_END = "reads several partitions to their ends (poll_to_partition_end reads one)"
_DISTINCT = "counts distinct records (a set or a dict): a duplicate must not count"
_DRIVES = "drives a client between looks (its poll serves the callbacks the look depends on)"
_RETRIES = "retries a request and fails with its last answer or error, not a condition"
_RUN_LENGTH = "bounds a run (a process's, a stress loop's, a pause's), not a wait"
_IMAGE = "image tier (buildah), not rerun here: support.consuming fits it"
INLINE_DEADLINES = {
    ("support/waiting.py", "_poll"): _HOME,
    ("support/consuming.py", "poll_messages"): _HOME,
    ("support/consuming.py", "poll_records"): _HOME,
    ("support/consuming.py", "poll_to_partition_end"): _HOME,
    ("connect/test_pipeline_proof.py", "committed_values"): "reads until positions reach the ends",
    (
        "connect/test_secured_workers.py",
        "test_distributed_workers_serve_https_with_basic_auth_and_forward_to_each_other",
    ): _RETRIES,
    (
        "connect/test_secured_workers.py",
        "test_the_principal_policy_lets_a_connector_produce_as_its_own_principal",
    ): "consumes until one value came, then asserts it came alone",
    ("connect/test_worker.py", "read_all"): "a count, then on to the end: duplicates show",
    ("crash/test_kill_writer.py", "kill_after_acks"): "reads a process's lines off a queue",
    ("crash/writer.py", "main"): _RUN_LENGTH,
    ("groups/group_proof/member.py", "__init__"): _RUN_LENGTH,
    ("transactions/txn_proof/worker.py", "__init__"): _RUN_LENGTH,
    ("transactions/test_exactly_once.py", "pause"): _RUN_LENGTH,
    (
        "unit/storage/test_threads.py",
        "test_upkeep_flushes_race_nothing_on_rolling_deleting_logs",
    ): _RUN_LENGTH,
    ("image/test_image.py", "_produce_and_consume"): "fails on any error but end of partition",
    (
        "integration/broker/test_client_quotas.py",
        "test_consumer_byte_rate_of_a_user_and_client_throttles_its_fetches",
    ): "consumes for a fixed time: it measures a rate",
    (
        "integration/broker/test_connection_limits.py",
        "closed_by_broker",
    ): "reads a socket until closed",
    (
        "integration/broker/test_controller_mutation_quota.py",
        "test_kafka_python_admin_client_is_strict_and_gets_throttling_quota_exceeded",
    ): _RETRIES,
    (
        "integration/broker/test_controller_mutation_quota.py",
        "test_strict_create_topics_refuses_the_excess_topics_and_they_pass_after_waiting",
    ): "retries after the broker's throttle time",
    (
        "integration/classic_groups/classic_wire.py",
        "call_retrying",
    ): "returns the last answer, retriable or not",
    (
        "integration/classic_groups/test_group_bounds.py",
        "test_a_real_consumer_is_refused_by_a_full_group",
    ): "polls until the client raises",
    (
        "integration/cli/test_cli.py",
        "test_ctrl_c_during_produce_reports_the_delivered_count_without_a_traceback",
    ): "reads a process's stderr as it comes (select)",
    (
        "integration/cli/test_local_security.py",
        "test_a_client_with_client_properties_produces_and_consumes",
    ): _DISTINCT,
    ("integration/cluster/test_controller_failover.py", "_consume_all"): _DISTINCT,
    (
        "integration/cluster/test_replica_budget.py",
        "test_create_topics_past_the_budget_is_refused_and_the_cluster_keeps_serving",
    ): "repeats a round of writes, no pause",
    (
        "integration/compat/confluent_suite/test_basic_operations.py",
        "consume_messages",
    ): _TO_THE_END,
    (
        "integration/compat/confluent_suite/test_describe_operations.py",
        "consume_messages",
    ): "commits each record as upstream's loop does",
    (
        "integration/compat/confluent_suite/test_user_scram_credentials.py",
        "_authenticates",
    ): "three outcomes: in, refused, or neither",
    (
        "integration/compat/test_aiokafka.py",
        "consume",
    ): "asyncio (getmany), then a last look for extras",
    (
        "integration/compat/test_confluent_kafka.py",
        "consume",
    ): "consume() batches, then a last look for extras",
    ("integration/compat/test_observability.py", "consume_all"): "counts consume() batches",
    (
        "integration/ops/test_groups_admin.py",
        "scraped_lags",
    ): "returns {} at the bound: the caller asserts",
    (
        "integration/ops/test_groups_admin.py",
        "test_a_kip848_group_lists_as_consumer_and_describes_its_assignment",
    ): _DRIVES,
    (
        "integration/ops/test_groups_admin.py",
        "topic_with_records",
    ): "bounds a produce loop as a whole",
    ("integration/security/test_client_matrix.py", "_until_allowed"): _RETRIES,
    (
        "integration/security/test_client_matrix.py",
        "test_bob_may_not_produce_consume_or_see_alices_topic",
    ): "collects error codes, not records",
    (
        "integration/security/test_control_plane_tls.py",
        "test_brokers_replicate_and_the_controller_leads_over_mutual_tls",
    ): _DISTINCT,
    (
        "integration/security/test_zookeeper_tls.py",
        "test_the_cluster_works_over_tls_with_secure_acls",
    ): _DISTINCT,
    (
        "integration/transactions/test_markers_on_a_cluster.py",
        "consume",
    ): "a quiet second after the count: extras show",
    ("k8s/operator/test_operator_certificates.py", "consume"): _DISTINCT,
    (
        "k8s/operator/test_operator_certificates.py",
        "test_a_scram_user_produces_and_consumes",
    ): _RETRIES,
    ("k8s/operator/test_operator_connect.py", "read_lines"): _DISTINCT,
    ("k8s/operator/test_operator_connect_secured.py", "read_lines"): _DISTINCT,
    ("k8s/operator/test_operator_image.py", "_produce_and_consume"): _IMAGE,
    (
        "k8s/operator/test_operator_zookeeper_tls.py",
        "test_the_cluster_serves_produce_and_consume",
    ): _DISTINCT,
    ("replication/proof/workload.py", "read_all"): _TO_THE_END,
    ("spark/test_write.py", "read_topic"): _TO_THE_END,
    (
        "spark/test_write.py",
        "test_transactional_stream_survives_a_killed_driver",
    ): "its listed wait_for",
    ("transactions/txn_proof/traffic.py", "read_all"): _TO_THE_END,
    ("support/buildah.py", "_wait_until_empty"): "answers yes or no, reaping as it waits",
    ("support/client_errors.py", "librdkafka_errors"): "returns what came: the caller asserts",
    ("support/k8s/image_mode.py", "kill_leftovers"): "kills as it waits",
    ("support/k8s/image_mode.py", "signal"): "a best-effort wait before signalling",
    ("support/k8s/kubelet.py", "_spawn"): "one deadline across several steps",
    ("support/k8s/kubelet.py", "stop"): "one grace period across the containers",
    ("support/postgres.py", "_wait_for_server"): _RETRIES,
}


def _python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def test_wait_helpers_are_the_shared_ones_or_a_listed_adapter():
    found = set()
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in WAIT_NAMES:
                found.add((str(path.relative_to(TESTS)), node.name))
    assert found == set(WAIT_ADAPTERS), "use support.waiting (or list the adapter and why)"


def test_no_test_edits_sys_path():
    offenders = [
        str(path.relative_to(TESTS))
        for path in _python_files()
        if path != Path(__file__).resolve()
        and "sys.path.insert" in (text := path.read_text(encoding="utf-8"))
        or "sys.path.append" in text
    ]
    assert offenders == [], "put the folder on [tool.pytest.ini_options] pythonpath instead"


def test_pythonpath_holds_folders_that_exist_and_never_the_root():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    paths = config["tool"]["pytest"]["ini_options"]["pythonpath"]
    for entry in paths:
        assert (ROOT / entry).is_dir(), entry
        # The root would make operator/ importable as a package named operator.
        assert (ROOT / entry).resolve() != ROOT, entry


def test_no_module_imported_by_name_has_two_homes_on_the_pythonpath():
    # A module imported by name (``from test_faults import run_scenario``, ``import proof``) would
    # otherwise come from whichever folder is listed first. Test modules of the same name in two
    # folders are fine while nobody imports them by name.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    homes: dict[str, list[str]] = {}
    for entry in config["tool"]["pytest"]["ini_options"]["pythonpath"]:
        for child in sorted((ROOT / entry).iterdir()):
            if child.suffix == ".py" or (child.is_dir() and child.name != "__pycache__"):
                homes.setdefault(child.stem, []).append(entry)
    imported = set()
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
            elif isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
    clashes = {name: homes[name] for name in imported & set(homes) if len(homes[name]) > 1}
    assert clashes == {}


def _deadline_functions(path: Path) -> set[str]:
    """The functions of ``path`` with a ``time.monotonic() + ...`` in them (innermost)."""
    found: set[str] = set()

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = (
                child.name
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
                else function
            )
            if (
                isinstance(child, ast.BinOp)
                and isinstance(child.op, ast.Add)
                and isinstance(child.left, ast.Call)
                and isinstance(child.left.func, ast.Attribute)
                and child.left.func.attr == "monotonic"
                and isinstance(child.left.func.value, ast.Name)
                and child.left.func.value.id == "time"
            ):
                found.add(name)
            visit(child, name)

    visit(ast.parse(path.read_text(encoding="utf-8")), "<module>")
    return found


def test_inline_deadlines_are_only_in_the_listed_functions():
    found = {
        (str(path.relative_to(TESTS)), function)
        for path in _python_files()
        for function in _deadline_functions(path)
    }
    assert found - set(INLINE_DEADLINES) == set(), (
        "a plain poll is support.waiting.wait_until, a read to a count support.consuming's; "
        "else list the function and why"
    )
    assert set(INLINE_DEADLINES) - found == set(), "listed but gone: drop it from the list"
