"""``odradek connect``'s files: connector files (.properties through the project's reader, .json
as a config map or a POST /connectors body) and worker files; what cannot be used is refused in
one line naming the file and the key, with exit code 2, before anything starts."""

from __future__ import annotations

import json
import socket

import pytest

from odradek.cli import main
from odradek.connect.process import ConnectorFileError, read_connector_file


def test_properties_connector_file(tmp_path) -> None:
    path = tmp_path / "source.properties"
    path.write_text(
        "# Kafka's connect-file-source.properties\n"
        "name=local-file-source\n"
        "connector.class=FileStreamSource\n"
        "tasks.max=1\n"
        "file=test.txt\n"
        "topic=connect-test\n"
    )
    name, config = read_connector_file(str(path))
    assert name == "local-file-source"
    assert config == {
        "name": "local-file-source",
        "connector.class": "FileStreamSource",
        "tasks.max": "1",
        "file": "test.txt",
        "topic": "connect-test",
    }


def test_json_connector_files_both_shapes(tmp_path) -> None:
    flat = tmp_path / "a.json"
    flat.write_text(json.dumps({"name": "a", "connector.class": "X"}))
    assert read_connector_file(str(flat)) == ("a", {"name": "a", "connector.class": "X"})
    body = tmp_path / "b.json"
    body.write_text(json.dumps({"name": "b", "config": {"connector.class": "X"}}))
    assert read_connector_file(str(body)) == ("b", {"name": "b", "connector.class": "X"})


@pytest.mark.parametrize(
    ("file", "text", "words"),
    [
        ("a.properties", "connector.class=X\n", ['"name"']),
        ("a.json", '{"name": "a", "tasks.max": [1]}', ['"tasks.max"', "a.json"]),
        ("a.json", "{nope", ["not valid JSON", "a.json"]),
        ("a.json", '{"name": "a", "config": {"name": "b"}}', ["does not match"]),
    ],
)
def test_bad_connector_files_name_the_file_and_field(tmp_path, file, text, words) -> None:
    path = tmp_path / file
    path.write_text(text)
    with pytest.raises(ConnectorFileError) as raised:
        read_connector_file(str(path))
    for word in words:
        assert word in str(raised.value)
    with pytest.raises(ConnectorFileError, match="missing"):
        read_connector_file(str(tmp_path / "missing.properties"))


def test_cli_refuses_bad_worker_files_with_exit_2(tmp_path, capsys) -> None:
    worker = tmp_path / "worker.properties"
    worker.write_text("bootstrap.servers=127.0.0.1:1\nno.such.key=1\n")
    assert main(["connect", "standalone", str(worker)]) == 2
    assert "no.such.key" in capsys.readouterr().err
    worker.write_text("bootstrap.servers=127.0.0.1:1\nplugin.path=/opt\n")
    assert main(["connect", "distributed", str(worker)]) == 2
    assert "plugin.path" in capsys.readouterr().err
    assert main(["connect", "standalone", str(tmp_path / "absent.properties")]) == 2
    assert "absent.properties" in capsys.readouterr().err


def test_cli_refuses_a_connector_given_twice(tmp_path, capsys) -> None:
    worker = tmp_path / "worker.properties"
    worker.write_text(
        "key.converter=StringConverter\nvalue.converter=StringConverter\n"
        f"offset.storage.file.filename={tmp_path / 'offsets'}\n"
    )
    connector = tmp_path / "c.properties"
    connector.write_text("name=c\nconnector.class=X\n")
    assert main(["connect", "standalone", str(worker), str(connector), str(connector)]) == 2
    assert "given twice: c" in capsys.readouterr().err


def _worker_file(tmp_path, listeners: str):
    worker = tmp_path / "worker.properties"
    worker.write_text(
        "bootstrap.servers=127.0.0.1:1\n"
        "key.converter=StringConverter\nvalue.converter=StringConverter\n"
        f"offset.storage.file.filename={tmp_path / 'offsets.json'}\n"
        f"listeners={listeners}\n"
    )
    return worker


def test_cli_exits_1_when_the_listener_is_taken_or_the_offsets_file_is_bad(
    tmp_path, capsys
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        worker = _worker_file(tmp_path, f"http://127.0.0.1:{port}")
        assert main(["connect", "standalone", str(worker)]) == 1
    assert "could not start" in capsys.readouterr().err
    (tmp_path / "offsets.json").write_text("not json")
    worker = _worker_file(tmp_path, "http://127.0.0.1:0")
    assert main(["connect", "standalone", str(worker)]) == 1
    assert "offsets.json" in capsys.readouterr().err
    worker = _worker_file(tmp_path, "ftp://127.0.0.1:0")
    assert main(["connect", "standalone", str(worker)]) == 1
    assert "only http:// and https://" in capsys.readouterr().err
    worker = _worker_file(tmp_path, "https://127.0.0.1:0")  # HTTPS without its keystore
    assert main(["connect", "standalone", str(worker)]) == 1
    assert "listeners.https.ssl.keystore.location" in capsys.readouterr().err
