"""docs/lsp-extensions.md and the server agree: every `forge/` request and `forge.*` command the
server registers is documented, and every protocol type's table lists exactly its JSON fields."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from pydantic.alias_generators import to_camel

from forge_lsp.server import protocol
from forge_lsp.server.app import create_server
from forge_lsp.server.settings import Settings

DOC = (Path(__file__).resolve().parents[1] / "docs" / "lsp-extensions.md").read_text()
TYPES = [
    cls
    for _, cls in inspect.getmembers(protocol, inspect.isclass)
    if issubclass(cls, protocol.Message) and cls is not protocol.Message and cls.__module__ == protocol.__name__
]


def documented_fields(name: str) -> set[str] | None:
    """The first-column names of the table under the heading `name`; None when there is no heading."""
    m = re.search(rf"^#+ {re.escape(name)}\n(.*?)(?=^#|\Z)", DOC, re.S | re.M)
    if m is None:
        return None
    rows = [line for line in m.group(1).splitlines() if line.startswith("| `")]
    return {re.match(r"\| `([^`]+)`", row).group(1) for row in rows}


def test_the_server_registers_exactly_the_documented_commands_and_requests():
    fm = create_server().protocol.fm
    assert set(fm.commands) == set(protocol.COMMANDS)
    assert {name for name in fm.features if name.startswith("forge/")} == set(protocol.REQUESTS)
    for name in (*protocol.COMMANDS, *protocol.REQUESTS):
        assert f"`{name}`" in DOC, name


def test_there_are_protocol_types_to_check():
    assert {"Job", "RunResult", "CandidateArgs", "DiffResult"} <= {cls.__name__ for cls in TYPES}


@pytest.mark.parametrize("cls", TYPES, ids=lambda c: c.__name__)
def test_every_protocol_type_is_documented_with_exactly_its_fields(cls):
    fields = documented_fields(cls.__name__)
    assert fields is not None, f"docs/lsp-extensions.md has no section for {cls.__name__}"
    assert fields == {to_camel(name) for name in cls.model_fields}, cls.__name__


def test_every_setting_is_documented():
    section = DOC[DOC.index("## Settings") :]
    for name in Settings.model_fields:
        assert f"`{to_camel(name)}`" in section, name


def test_wire_names_are_camel_case_and_none_is_left_out():
    job = protocol.Job(
        id="optimize-1",
        kind="optimize",
        uri="file:///m.py",
        target="Model",
        title="t",
        status="done",
        message="",
        started=1.0,
        finished=None,
        run_id="r1",
        percentage=100,
    )
    assert protocol.wire(job) == {
        "id": "optimize-1",
        "kind": "optimize",
        "uri": "file:///m.py",
        "target": "Model",
        "title": "t",
        "status": "done",
        "message": "",
        "started": 1.0,
        "runId": "r1",
        "percentage": 100,
    }


def test_positional_arguments_flat_or_wrapped_and_clear_errors():
    args = ("file:///m.py", "Model", "r1", "r1/c2", {"show": False})
    a = protocol.positional(protocol.CandidateArgs, args)
    assert (a.class_name, a.candidate_id, a.options.show) == ("Model", "r1/c2", False)
    assert protocol.positional(protocol.CandidateArgs, (list(args[:4]),)).options is None
    with pytest.raises(protocol.ProtocolError, match=r"expected 4 arguments \(uri, className, runId, candidateId\)"):
        protocol.positional(protocol.CandidateArgs, ("file:///m.py", "Model"))
    with pytest.raises(protocol.ProtocolError, match="name"):
        protocol.positional(protocol.TargetArgs, ("file:///m.py", 42))
