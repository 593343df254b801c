"""Whole-model hot spots in the editor, end to end: a real LSP client (pytest-lsp) and the real server, whose
hot-spot job runs a small model on the CPU in a child process. "Find hot spots" on `build`, the job's progress
and end, the lens and hover on the hot class, stale after an edit (in the editor and on disk), cancel (the
child's whole tree gone), the report read at start-up, and Optimize (captured inputs) on the extracted task."""

from __future__ import annotations

import atexit
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsp_session import open_session
from lsprotocol import types as t
from pytest_lsp import ClientServerConfig, LanguageClient
from test_server_e2e import edit_doc, job_of, open_doc, until
from test_server_faults import PROGRESS, RawClient, cmdline, descendants, ended, lenses, running

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)

CACHE = tempfile.mkdtemp(prefix="forge-lsp-hotspots-cache-")
atexit.register(shutil.rmtree, CACHE, True)

MODEL = """\
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, dim: int = 32):
        super().__init__()
        self.fc1 = nn.Linear(dim, dim * 2)
        self.fc2 = nn.Linear(dim * 2, dim)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(32) for _ in range(2)])
        self.head = nn.Linear(32, 16)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def build():
    return Net().eval(), (torch.randn(4, 16, 32),)
"""

# builds nothing for ten minutes, with a process of its own below it: a cancel must end both
SLEEPS = """\
import subprocess
import time

import torch.nn as nn


class Idle(nn.Module):
    def forward(self, x):
        return x


def build():
    subprocess.Popen(["sleep", "607"])
    time.sleep(600)
"""

SUMMARY = re.compile(r"^forge: \d+\.\d% of model time")
STALE = "(stale: changed since the hot-spot run)"


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[sys.executable, "-m", "forge_lsp.server"],
        server_env={
            "FORGE_CACHE_DIR": CACHE,
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "OMP_NUM_THREADS": "1",
            "FORGE_LSP_LOG": str(Path(CACHE) / "server.log"),
        },
    )
)
async def client(lsp_client: LanguageClient, tmp_path: Path):
    (tmp_path / "tiny_net.py").write_text(MODEL)
    (tmp_path / "sleeps.py").write_text(SLEEPS)
    lsp_client.docs = {}

    # no model: Optimize tries the offline candidates
    await open_session(lsp_client, tmp_path, {"device": "cpu", "profile": False})
    yield
    await lsp_client.shutdown_session()


def line_of(text: str, start: str) -> int:
    return next(i for i, line in enumerate(text.splitlines()) if line.startswith(start))


async def code_lenses(client: LanguageClient, uri: str) -> list[t.CodeLens]:
    return await client.text_document_code_lens_async(t.CodeLensParams(text_document=t.TextDocumentIdentifier(uri=uri)))


async def hover(client: LanguageClient, uri: str, line: int) -> str:
    h = await client.text_document_hover_async(
        t.HoverParams(text_document=t.TextDocumentIdentifier(uri=uri), position=t.Position(line=line, character=7))
    )
    return h.contents.value if h is not None else ""


def summary_lens(lenses_: list[t.CodeLens], line: int) -> t.CodeLens | None:
    return next((x for x in lenses_ if x.range.start.line == line and SUMMARY.match(x.command.title)), None)


async def find_hot_spots(client: LanguageClient, uri: str) -> str:
    """Run the "Find hot spots" lens of `build` and wait for the job's end; its progress token."""
    text = client.docs[uri]["text"]
    lens = next(x for x in await code_lenses(client, uri) if x.command.command == "forge.hotspots")
    assert lens.command.title == "forge: Find hot spots" and lens.range.start.line == line_of(text, "def build")
    assert list(lens.command.arguments) == [uri, "build"]
    started = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command=lens.command.command, arguments=lens.command.arguments)
    )
    assert started["job"].startswith("hotspots-"), started
    token = f"forge/{started['job']}"
    await until(lambda: any(r.kind == "end" for r in client.progress_reports.get(token, [])), 120, "the job's end")
    return token


@pytest.mark.asyncio
async def test_find_hot_spots_puts_the_share_of_model_time_on_the_hot_class_and_marks_it_stale(
    client: LanguageClient, tmp_path: Path
):
    t0 = time.monotonic()
    uri = open_doc(client, tmp_path / "tiny_net.py")
    token = await find_hot_spots(client, uri)
    reports = client.progress_reports[token]
    kinds = [r.kind for r in reports]
    assert kinds[0] == "begin" and kinds[-1] == "end" and "report" in kinds, kinds
    assert reports[0].cancellable is True and reports[0].title == "forge: hot spots of build"
    steps = [r.message for r in reports if r.kind == "report"]
    assert "profiling 5/5" in steps and "saving captures" in steps, steps
    percentages = [r.percentage for r in reports if r.kind == "report"]
    assert percentages == sorted(percentages) and 0 < percentages[-1] <= 100, percentages
    end = reports[-1].message
    assert re.match(r"done: Net \d+\.\d{3} ms per forward on cpu · ", end) and "Block " in end, end
    # the end and the message say the same: the model, its time per forward, its hottest classes (three at
    # most; Block and Linear are all this model has beside itself)
    top = end.removeprefix("done: ").split(" · ")[1].split(", ")
    # (Block is its Linear and little else: their shares are within timing noise of each other, in either order)
    assert sorted(c.split()[0] for c in top) == ["Block", "Linear"], top
    assert all(re.fullmatch(r"\w+ \d+\.\d%", c) for c in top), top
    await until(lambda: any(end.removeprefix("done: ") in m.message for m in client.messages), 10, "the summary")
    job = await job_of(client, token.removeprefix("forge/"))
    assert job["kind"] == "hotspots" and job["status"] == "done" and job["target"] == "build"

    text = client.docs[uri]["text"]
    block, net = line_of(text, "class Block"), line_of(text, "class Net")
    found = await code_lenses(client, uri)
    lens = summary_lens(found, block)
    assert lens is not None, [(x.range.start.line, x.command.title) for x in found]
    assert "2 instances" in lens.command.title and "inputs (4, 16, 32) fp32" in lens.command.title
    assert STALE not in lens.command.title and lens.command.command == ""  # a label
    assert summary_lens(found, net) is not None  # the model itself is a class of this file too
    # torch.nn's Linear is hot, but not the user's: no lens anywhere else
    assert {x.range.start.line for x in found if SUMMARY.match(x.command.title)} == {block, net}
    captured = [x for x in found if x.command.title == "Optimize (captured inputs)"]
    assert [(x.range.start.line, x.command.command, list(x.command.arguments)) for x in captured] == [
        (block, "forge.optimizeCaptured", [uri, "Block"])
    ]
    value = await hover(client, uri, block)
    assert lens.command.title.removeprefix("forge: ") in value, value
    assert "tiny_net.py:build" in value and "`Net.blocks.0`" in value and "`Net.blocks.1`" in value, value
    assert "stale" not in value and ".forge/tasks/Block.py" in value, value

    # an edit in the editor: the lens follows the class, and says it is stale
    edit_doc(client, uri, "# a comment\n" + text)
    found = await code_lenses(client, uri)
    lens = summary_lens(found, block + 1)
    assert lens is not None and lens.command.title.endswith(STALE), [x.command.title for x in found]
    assert "stale: changed since the hot-spot run" in await hover(client, uri, block + 1)
    edit_doc(client, uri, text)  # undone: what the run measured again
    assert STALE not in summary_lens(await code_lenses(client, uri), block).command.title

    # a change on disk of a file the editor does not hold
    client.text_document_did_close(t.DidCloseTextDocumentParams(text_document=t.TextDocumentIdentifier(uri=uri)))
    (tmp_path / "tiny_net.py").write_text(text.replace("dim * 2", "dim * 4"))
    client.workspace_did_change_watched_files(
        t.DidChangeWatchedFilesParams(changes=[t.FileEvent(uri=uri, type=t.FileChangeType.Changed)])
    )
    lens = summary_lens(await code_lenses(client, uri), block)  # the file's text is read when asked
    assert lens is not None and lens.command.title.endswith(STALE), lens
    print(f"hot-spot run, lenses, hover and stale: {time.monotonic() - t0:.1f} s")


@pytest.mark.asyncio
async def test_cancel_ends_the_hot_spot_run_and_its_whole_process_tree(client: LanguageClient, tmp_path: Path):
    uri = open_doc(client, tmp_path / "sleeps.py")
    started = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="forge.hotspots", arguments=[uri, "build"])
    )
    token = f"forge/{started['job']}"

    def tree() -> list[int]:
        runners = [
            int(p.name)
            for p in Path("/proc").iterdir()
            if p.name.isdigit()
            and "forge_lsp.hotspots.runner" in (line := cmdline(int(p.name)))
            and str(tmp_path) in line
        ]
        return [runners[0], *descendants(runners[0])] if runners else []

    # the entry is building its model: sleeping, with a `sleep 607` of its own below it
    procs = await until(lambda: (p := tree()) and any("sleep 607" in cmdline(x) for x in p) and p, 60, "the sleep")
    await until(
        lambda: any(r.kind == "report" and r.message == "building the model" for r in client.progress_reports[token]),
        5,
        "the step",
    )
    t0 = time.monotonic()
    client.window_work_done_progress_cancel(t.WorkDoneProgressCancelParams(token=token))
    await until(lambda: any(r.kind == "end" for r in client.progress_reports[token]), 5, "the job's end")
    await until(lambda: not running(procs), 3, "the child's tree gone")
    print(f"cancelled in {time.monotonic() - t0:.2f} s")
    assert client.progress_reports[token][-1].message.startswith("cancelled"), client.progress_reports[token][-1]
    assert (await job_of(client, started["job"]))["status"] == "cancelled"
    assert not running(procs), [(p, cmdline(p)) for p in running(procs)]
    # nothing was shown for it: the lenses of the last report are as they were (none here)
    assert not any(SUMMARY.match(x.command.title) for x in await code_lenses(client, uri))


def test_the_last_report_is_read_at_start_up(tmp_path: Path):
    """A workspace where `forge hotspots --extract` ran before the editor started: its report and task are
    shown; a file written after the report is stale from the start."""
    (tmp_path / "tiny_net.py").write_text(MODEL)
    first = RawClient(tmp_path)
    try:
        first.initialize(tmp_path, PROGRESS, {"device": "cpu"})
        uri = first.open(tmp_path / "tiny_net.py")
        reply = first.call("workspace/executeCommand", {"command": "forge.hotspots", "arguments": [uri, "build"]})
        assert ended(first, reply["result"]["job"], 120)["message"].startswith("done: Net")
    finally:
        first.close()
    assert (tmp_path / ".forge" / "hotspots.json").is_file() and (tmp_path / ".forge" / "tasks" / "Block.py").is_file()
    block = line_of(MODEL, "class Block")
    second = RawClient(tmp_path)
    try:
        second.initialize(tmp_path, PROGRESS, {"device": "cpu"})
        uri = (tmp_path / "tiny_net.py").as_uri()  # not open: read from disk
        titles = second.wait(
            lambda: (
                (at := [x["command"]["title"] for x in lenses(second, uri) if x["range"]["start"]["line"] == block])
                and any(SUMMARY.match(x) for x in at)
                and at
            ),
            20,
            "the hot class's lens",
        )
        assert any(SUMMARY.match(x) and STALE not in x for x in titles), titles
        assert "Optimize (captured inputs)" in titles, titles
    finally:
        second.close()
    time.sleep(0.05)
    (tmp_path / "tiny_net.py").write_text(MODEL + "\n")  # after the report
    third = RawClient(tmp_path)
    try:
        third.initialize(tmp_path, PROGRESS, {"device": "cpu"})
        titles = third.wait(
            lambda: [x["command"]["title"] for x in lenses(third, uri) if SUMMARY.match(x["command"]["title"])], 20
        )
        assert all(x.endswith(STALE) for x in titles), titles
    finally:
        third.close()


@pytest.mark.asyncio
@pytest.mark.slow
async def test_optimize_captured_inputs_runs_on_the_extracted_task(client: LanguageClient, tmp_path: Path):
    uri = open_doc(client, tmp_path / "tiny_net.py")
    await find_hot_spots(client, uri)
    block = line_of(MODEL, "class Block")
    lens = next(x for x in await code_lenses(client, uri) if x.command.title == "Optimize (captured inputs)")
    t0 = time.monotonic()
    started = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command=lens.command.command, arguments=lens.command.arguments)
    )
    token = f"forge/{started['job']}"
    await until(lambda: any(r.kind == "end" for r in client.progress_reports.get(token, [])), 300, "the job's end")
    print(f"optimize (captured inputs): {time.monotonic() - t0:.1f} s")
    reports = client.progress_reports[token]
    assert reports[0].title == "forge: optimize Block (captured inputs)"
    end = reports[-1].message
    job = await job_of(client, started["job"])
    assert end.startswith("done: ") and job["status"] == "done" and job["kind"] == "optimize", (end, job)
    run_id = job["runId"]
    assert f"(run {run_id})" in end, end
    assert any("Block (captured inputs)" in m.message and run_id in m.message for m in client.messages)
    value = await hover(client, uri, block)
    assert "*optimize (captured inputs)*" in value and run_id in value, value
    # offline only: an answer (a compiled subclass of the task's Model) is offered on the user's class, on its
    # line, or there is none; either way the file is untouched until Accept (tests/test_server_e2e.py accepts one)
    found = await code_lenses(client, uri)
    accepts = [x for x in found if x.command.command == "forge.accept"]
    if "proposal" in job:
        assert job["proposal"]["className"] == "Block" and [x.range.start.line for x in accepts] == [block], job
    else:
        assert accepts == [] and not any(d.code == "faster-candidate" for d in client.diagnostics.get(uri, []))
    assert (tmp_path / "tiny_net.py").read_text() == MODEL
