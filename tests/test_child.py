"""Each child process's request is one pydantic model both sides import (`forge_lsp.child`): what the parent writes
is what the child reads, a malformed request ends the child with one line naming the field, and
`run_script_as_main` runs a user's script as ``python script.py ARGS`` would."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from conftest import ROOT

from forge_lsp.agent.offline import probe
from forge_lsp.agent.offline.probe import ProbeRequest
from forge_lsp.child import ChildRequest, MalformedRequest, read_request, run_script_as_main
from forge_lsp.engine.candidate import Candidate
from forge_lsp.engine.sanitize import SanitizeRequest
from forge_lsp.engine.task import InputSet, Task
from forge_lsp.hotspots import model_check, runner
from forge_lsp.hotspots.entry import Entry
from forge_lsp.hotspots.requests import HotspotRequest, ModelCheckRequest
from forge_lsp.profiler import peaks, target
from forge_lsp.profiler.peaks import PeaksRequest
from forge_lsp.profiler.target import ProfileCall, ProfileRequest, ProfileScript

TASK = Task(
    path=Path("/work/tasks/softmax.py"),
    source="import torch\nclass Model(torch.nn.Module):\n    pass\n",
    model_class="Net",
    inputs_fn="make_inputs",
    seed=7,
    vary={"N": [8, 16]},
    input_sets=[InputSet(name="captured", path=Path("/work/captures/x.pt"))],
)
CANDIDATE = Candidate.from_source("class ModelNew:\n    pass\n", name="fast", path=Path("/work/fast.py"))
SCRIPT = Entry(text="train.py --steps 3", kind="script", path=Path("/work/train.py"), argv=["--steps", "3"])
FUNCTION = Entry(
    text='models.py:build(size="full")',
    kind="function",
    path=Path("/work/models.py"),
    function="build",
    arguments={"size": "full", "dims": [1, 2], "nested": {"a": None}},
)


def hotspot_request(tmp: Path) -> HotspotRequest:
    return HotspotRequest(
        entry=FUNCTION,
        device="cuda:1",
        workspace=tmp,
        out=tmp / "out",
        progress=tmp / "out" / "progress.jsonl",
        warmup=1,
        iterations=4,
        top=2,
        classes=["models.py:Block", "Attention"],
        capture_calls=3,
        capture_call_mb=64,
        capture_total_mb=512,
    )


def model_check_request(tmp: Path) -> ModelCheckRequest:
    return ModelCheckRequest(
        entry=SCRIPT,
        device="cpu",
        workspace=tmp,
        out=tmp / "check",
        patches=[{"cls": "train.py:Block", "instances": ["Net.blocks.0"], "domain": {"dtypes": ["float32"]}}],
        tolerances={"float32": [1e-4, 1e-5], "bfloat16": [1e-2, 1e-2]},
        reps=5,
        timing_budget_s=2.5,
        model_modes=["default", "blocks+channels_last"],
        blocks=["Net.blocks.0"],
        root="Net",
    )


#: every child's request, with values other than its defaults
REQUESTS = {
    "probe": lambda tmp: ProbeRequest(out=tmp / "graph.json", tasks=[TASK, TASK.model_copy(update={"seed": 1})]),
    "sanitize": lambda tmp: SanitizeRequest(task=TASK, candidate=CANDIDATE),
    "hotspots": hotspot_request,
    "model_check": model_check_request,
    "profile_call": lambda tmp: ProfileCall(
        device="cuda:0", mode="degraded", task=TASK, candidate=CANDIDATE, warmup=1, reps=2
    ),
    "profile_reference": lambda tmp: ProfileCall(device="cpu", task=TASK),
    "profile_script": lambda tmp: ProfileScript(
        device="cuda:0", script=tmp / "run.py", args=["--n", "2"], kernel=r"\bscale\b"
    ),
    "peaks": lambda tmp: PeaksRequest(device="cuda:3", cache_dir=tmp / "cache"),
}


@pytest.mark.parametrize("name", sorted(REQUESTS))
def test_each_childs_request_reads_back_as_the_parent_wrote_it(tmp_path, name):
    """Every field, nested models (task, candidate, entry) and free-form parts (patches) included, comes back equal,
    and the file holds every field (defaults too: the child never fills one in)."""
    request = REQUESTS[name](tmp_path)
    path = request.write(tmp_path / "request.json")
    back = type(request).read(path)
    assert back == request and type(back) is type(request)
    assert set(json.loads(path.read_text())) == set(type(request).model_fields)


@pytest.mark.parametrize("name", ["profile_call", "profile_reference", "profile_script"])
def test_the_profiled_process_tells_its_two_requests_apart(tmp_path, name):
    """`target.main` reads a `ProfileRequest`: a call and a script each come back as what they were."""
    request = REQUESTS[name](tmp_path)
    back = read_request(ProfileRequest, request.write(tmp_path / "request.json"))
    assert back == request and type(back) is type(request)


def test_a_degraded_profile_request_is_the_same_request_in_the_other_mode(tmp_path):
    """`ncu._degraded` rewrites the request with `mode="degraded"`; nothing else changes."""
    request = REQUESTS["profile_script"](tmp_path)
    back = read_request(
        ProfileRequest, request.model_copy(update={"mode": "degraded"}).write(tmp_path / "request.json")
    )
    assert back.mode == "degraded" and back.model_copy(update={"mode": "ncu"}) == request


def _written(tmp: Path, name: str, edit) -> Path:
    """The request `name` as its parent writes it, with `edit` applied to its JSON."""
    data = json.loads(REQUESTS[name](tmp).model_dump_json())
    edit(data)
    path = tmp / "request.json"
    path.write_text(json.dumps(data))
    return path


#: (request, how the file is broken, the field the error must name)
MALFORMED = [
    ("hotspots", lambda d: d.pop("device"), "'device': Field required"),
    ("hotspots", lambda d: d.update(warmup="two"), "'warmup': Input should be a valid integer"),
    ("hotspots", lambda d: d["entry"].pop("kind"), "'entry.kind': Field required"),
    ("hotspots", lambda d: d.update(capture_mb=64), "'capture_mb': Extra inputs are not permitted"),
    ("model_check", lambda d: d["tolerances"].update(float16="tight"), "'tolerances.float16': Input should be"),
    ("probe", lambda d: d["tasks"][1].pop("source"), "'tasks[1].source': Field required"),
    ("sanitize", lambda d: d.pop("candidate"), "'candidate': Field required"),
    ("peaks", lambda d: d.update(cache_dir=None), "'cache_dir': Input is not a valid path"),
]


@pytest.mark.parametrize(("name", "edit", "says"), MALFORMED)
def test_a_malformed_request_is_one_line_naming_the_field(tmp_path, name, edit, says):
    path = _written(tmp_path, name, edit)
    with pytest.raises(MalformedRequest) as raised:
        type(REQUESTS[name](tmp_path)).read(path)
    line = raised.value.code
    assert isinstance(line, str) and "\n" not in line, line
    assert str(path) in line and f"field {says}" in line, line
    assert isinstance(raised.value, SystemExit)  # out of a child's main: that line on stderr, exit status 1


def test_a_request_that_is_not_json_or_not_there_is_one_line_too(tmp_path):
    path = tmp_path / "request.json"
    path.write_text('{"device": "cpu", "cache_dir": ')
    with pytest.raises(MalformedRequest, match=r"^malformed PeaksRequest .*request\.json: Invalid JSON") as raised:
        PeaksRequest.read(path)
    assert "\n" not in raised.value.code
    with pytest.raises(MalformedRequest, match=r"^cannot read the PeaksRequest .*missing\.json: No such file"):
        PeaksRequest.read(tmp_path / "missing.json")


def test_a_profile_request_of_neither_kind_names_the_kind(tmp_path):
    path = _written(tmp_path, "profile_script", lambda d: d.update(kind="trace"))
    with pytest.raises(MalformedRequest, match="field 'kind'") as raised:
        read_request(ProfileRequest, path)
    assert "'call'" in raised.value.code and "'script'" in raised.value.code  # what it may be
    assert "\n" not in raised.value.code


def test_several_problems_are_counted_on_the_same_line(tmp_path):
    path = _written(tmp_path, "hotspots", lambda d: [d.pop(k) for k in ("device", "top", "out")])
    with pytest.raises(MalformedRequest, match=r"field 'device': Field required \(and 2 more problems\)$"):
        HotspotRequest.read(path)


#: each child's main, as its ``__main__`` calls it (sanitize_target imports torch: only in the process test below)
MAINS = {
    "probe": lambda path: probe.main([str(path)]),
    "hotspots": lambda path: runner.main(["runner.py", str(path)]),
    "model_check": lambda path: model_check.main(["model_check.py", str(path)]),
    "profile_script": lambda path: target.main([str(path)]),
    "peaks": lambda path: peaks.main([str(path)]),
}


@pytest.mark.parametrize("name", sorted(MAINS))
def test_each_childs_main_refuses_a_malformed_request_before_doing_anything(tmp_path, name):
    """The request is read first: nothing is written (no error.txt, no out folder) and nothing runs."""
    path = _written(tmp_path, name, lambda d: d.pop("device" if "device" in d else "out"))
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(MalformedRequest, match="Field required"):
        MAINS[name](path)
    assert sorted(tmp_path.rglob("*")) == before


CHILDREN = {
    "probe": "forge_lsp.agent.offline.probe",
    "sanitize": "forge_lsp.engine.harness.sanitize_target",
    "hotspots": "forge_lsp.hotspots.runner",
    "model_check": "forge_lsp.hotspots.model_check",
    "profile_call": "forge_lsp.profiler.target",
    "peaks": "forge_lsp.profiler.peaks",
}


@pytest.mark.integration  # starts each child process
@pytest.mark.parametrize("name", sorted(CHILDREN))
def test_a_child_given_a_malformed_request_says_so_in_one_line_without_a_traceback(tmp_path, name):
    path = _written(tmp_path, name, lambda d: d.update(surprise=1))
    run = subprocess.run(
        [sys.executable, "-m", CHILDREN[name], str(path)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 1, run.stderr
    *before, last = run.stderr.strip().splitlines()
    assert last.startswith("malformed ") and "surprise': Extra inputs are not permitted" in last, run.stderr
    # nothing else but Python's warnings (python -m of a module its package imports: runpy's RuntimeWarning)
    assert "Traceback" not in run.stderr and all("Warning: " in line for line in before), run.stderr


# ----------------------------------------------------------------------------- run_script_as_main
SCRIPT_SOURCE = textwrap.dedent(
    """
    import sys

    import {sibling} as sibling


    class Model:
        pass


    SEEN = {{"name": __name__, "file": __file__, "argv": list(sys.argv), "sibling": sibling.VALUE}}
    if __name__ == "__main__":
        SEEN["main_block"] = True
        SEEN["class_module"] = Model.__module__
        if "--exit" in sys.argv:
            sys.exit(int(sys.argv[-1]))
    """
)


@pytest.fixture
def script(tmp_path, monkeypatch):
    """A script beside a module of its own (a name no other test imports), in a folder not on sys.path; sys.argv,
    sys.path and sys.modules are restored after the test."""
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    sibling = f"forge_sibling_{uuid.uuid4().hex}"
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / f"{sibling}.py").write_text("VALUE = 42\n")
    path = folder / "train.py"
    path.write_text(SCRIPT_SOURCE.format(sibling=sibling))
    yield path
    sys.modules.pop(sibling, None)


def test_run_script_as_main_runs_the_script_as_main_with_its_arguments_and_its_folder_importable(script):
    assert str(script.parent) not in sys.path
    seen = run_script_as_main(script, ["--steps", "3"])["SEEN"]
    assert seen == {
        "name": "__main__",
        "file": str(script),
        "argv": [str(script), "--steps", "3"],
        "sibling": 42,  # its own folder first on sys.path: it imports the module beside it
        "main_block": True,
        "class_module": "__main__",  # where the hot-spot runner looks for a script's classes
    }
    # what it defined may import its neighbours later: its folder and its argv stay
    assert sys.path[0] == str(script.parent) and sys.argv == [str(script), "--steps", "3"]


def test_run_script_as_main_takes_a_path_as_text_too_and_leaves_the_scripts_exit_to_the_caller(script):
    with pytest.raises(SystemExit) as raised:
        run_script_as_main(str(script), ["--exit", "3"])
    assert raised.value.code == 3  # the profiled process makes it its own exit status


def test_every_childs_request_is_a_child_request():
    """One base for all: a field the child does not know is refused rather than ignored."""
    models = [type(make(Path("/tmp"))) for make in REQUESTS.values()]
    assert all(issubclass(m, ChildRequest) and m.model_config.get("extra") == "forbid" for m in models)
