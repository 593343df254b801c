"""The guards that keep every call forge routes to new code inside the domain its candidate was verified on
(`Verdict.domain`): the guarded rewrite of the user's class (`reintegrate`), reached by the editor's Accept, the
captured-inputs Accept and `--model-wide --apply`, and the model-wide patch (`hotspots.patching`).

Each candidate here is made of torch ops and is wrong outside its domain the way a real kernel is: one reads its
input's memory as row-major (a kernel handed ``x.data_ptr()``), one runs on the legacy default stream whatever
stream is current (a ``<<<grid, block>>>`` launch without a stream). A call the guard lets through to it outside
the domain computes something else (or, under CUDA-graph capture, raises), so every test below fails without the
guard it names. Rewritten files are imported in fresh interpreters; patches are installed in this process.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from forge_lsp.engine.verdict import Domain, InputSpec, Status, Verdict
from forge_lsp.reintegrate import Rewrite, VerifiedDomain, domain_from_verdict, rewrite_module

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)

USER = textwrap.dedent(
    '''
    import torch
    import torch.nn as nn

    n = 16


    class Model(nn.Module):
        """x * scale + 1, a scale per column."""

        def __init__(self, n):
            super().__init__()
            self.scale = nn.Parameter(torch.linspace(0.5, 2.0, n))

        def forward(self, x):
            return x * self.scale + 1.0


    def get_inputs():
        return [torch.randn(n, n)]


    def get_init_inputs():
        return [n]
    '''
)

CANDIDATE = textwrap.dedent(
    '''
    import torch
    import torch.nn as nn


    class ModelNew(nn.Module):
        """{doc}"""

        def __init__(self, n=16):
            super().__init__()
            self.scale = nn.Parameter(torch.ones(n))

        def forward(self, x):
    {body}
    '''
)


def _candidate(doc: str, body: str) -> str:
    return CANDIDATE.format(doc=doc, body=textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8))


#: right for contiguous inputs only: it reads x's memory as row-major, whatever x's strides
ROW_MAJOR = _candidate(
    "Reads x's memory as row-major, as a kernel handed x.data_ptr() does: right for contiguous x only.",
    """
    rows = x.as_strided(x.shape, (x.shape[1], 1), x.storage_offset())
    return rows * self.scale + 1.0
    """,
)
#: right for any layout
ANY_LAYOUT = _candidate("The same computation, for any layout.", "return x * self.scale + 1.0")
#: right on the device's default stream only: it runs there whatever stream is current
DEFAULT_STREAM = _candidate(
    "Runs on the legacy default stream, as a <<<grid, block>>> launch without a stream does.",
    """
    with torch.cuda.stream(torch.cuda.default_stream(x.device)):
        return x * self.scale + 1.0
    """,
)

#: the rewrite's guard code for the stream rule (emitted only when the domain needs it)
STREAM_CHECK = "torch.cuda.is_current_stream_capturing()"


def verdict(device: str = "cpu", layouts: str = "contiguous", streams: str | None = None, domain: bool = True):
    """A correct verdict on the task's own 16x16 float32 input, verified on `layouts` and `streams` (or, with
    `domain=False`, an older verdict without a domain)."""
    return Verdict(
        status=Status.correct,
        device=device,
        checkpoint_compatible=True,
        inputs=[InputSpec(case="seed0", index=0, dtype="float32", shape=[16, 16], contiguous=True)],
        domain=Domain(sizes=["seed0"], dtypes=["float32"], layouts=layouts, streams=streams) if domain else None,
    )


# ----------------------------------------------------------------------------- the domain read from a verdict
def test_the_verified_domain_follows_the_verdicts_layouts_and_streams():
    contiguous = domain_from_verdict(verdict(layouts="contiguous"))
    assert contiguous.contiguous and not contiguous.default_stream
    assert contiguous.sizes == [[[16], [16]]] and contiguous.dtypes == ["float32"] and contiguous.ranks == [2]
    any_layout = domain_from_verdict(verdict(layouts="any"))
    assert not any_layout.contiguous and "any layout" in any_layout.describe()
    default = domain_from_verdict(verdict("cuda:0", layouts="any", streams="default"))
    assert default.default_stream and default.device_types == ["cuda"]
    assert "the default stream only (no side stream, no CUDA-graph capture)" in default.describe()
    assert not domain_from_verdict(verdict("cuda:0", streams="any")).default_stream
    # an older verdict, without a domain: contiguous inputs required (as its inputs were), no stream rule
    old = domain_from_verdict(verdict("cuda:0", domain=False))
    assert old.contiguous and not old.default_stream
    # and a domain saved before the stream rule existed (a proposal, a model-wide result) reads the same
    saved = old.model_dump()
    del saved["default_stream"]
    assert VerifiedDomain(**saved) == old


def test_the_stream_check_is_written_only_for_a_domain_verified_on_the_default_stream():
    for streams, written in (("default", True), ("any", False), (None, False)):
        domain = domain_from_verdict(verdict("cuda:0", streams=streams))
        rw = rewrite_module(USER, "Model", DEFAULT_STREAM, domain)
        assert (STREAM_CHECK in rw.new_text) is written, streams
        assert ("the default stream only" in rw.summary) is written
    old = rewrite_module(USER, "Model", ROW_MAJOR, domain_from_verdict(verdict(domain=False)))
    assert STREAM_CHECK not in old.new_text and "_forge_contiguous = True" in old.new_text


# ----------------------------------------------------------------------------- the rewrite's guard, CPU
ROUTES = """
def routed(call):
    before = dict(new.Model._forge_calls)
    y = call()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    after = new.Model._forge_calls
    return "reference" if after["reference"] > before["reference"] else "optimized", y

torch.manual_seed(0)
ref, opt = old.Model(16), new.Model(16)
opt.load_state_dict(ref.state_dict())
"""


def run_rewritten(tmp_path: Path, rw: Rewrite, body: str) -> dict:
    """Import the rewritten file as `new` and the original as `old` in a fresh interpreter, run `body`, return
    its `report`."""
    (tmp_path / "rewritten.py").write_text(rw.new_text)
    (tmp_path / "original.py").write_text(USER)
    script = textwrap.dedent(
        """
        import importlib.util, json, sys
        import torch


        def load(path, name):
            spec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
            return mod


        new, old = load("rewritten.py", "rewritten"), load("original.py", "original")
        report = {}
        """
    )
    script += textwrap.dedent(ROUTES) + textwrap.dedent(body) + "\nprint('REPORT ' + json.dumps(report))\n"
    (tmp_path / "check.py").write_text(script)
    env = {k: v for k, v in os.environ.items() if k != "FORGE_DISABLE"} | {"OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "check.py"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-5000:]
    line = next(x for x in p.stdout.splitlines() if x.startswith("REPORT "))
    return json.loads(line[len("REPORT ") :])


LAYOUT_CASES = """
x = torch.randn(16, 16)
cases = {"contiguous": x, "transposed": x.t(), "mT": torch.randn(16, 16).mT, "other_size": torch.randn(8, 16)}
with torch.no_grad():
    for name, a in cases.items():
        route, y = routed(lambda: opt(a))
        report[name] = [route, torch.equal(y, ref(a))]
"""


def test_a_rewrite_verified_on_contiguous_inputs_sends_a_transposed_one_to_the_original(tmp_path):
    """The contiguity guard: the row-major candidate gets the contiguous input only; the transposed one (and
    a size it was not verified at) runs the original forward, with the original's result."""
    rw = rewrite_module(USER, "Model", ROW_MAJOR, domain_from_verdict(verdict(layouts="contiguous")))
    r = run_rewritten(tmp_path, rw, LAYOUT_CASES)
    assert r == {
        "contiguous": ["optimized", True],
        "transposed": ["reference", True],
        "mT": ["reference", True],
        "other_size": ["reference", True],
    }


def test_a_rewrite_verified_on_any_layout_sends_a_transposed_input_to_the_candidate(tmp_path):
    rw = rewrite_module(USER, "Model", ANY_LAYOUT, domain_from_verdict(verdict(layouts="any")))
    assert "_forge_contiguous = False" in rw.new_text
    r = run_rewritten(tmp_path, rw, LAYOUT_CASES)
    assert r == {
        "contiguous": ["optimized", True],
        "transposed": ["optimized", True],
        "mT": ["optimized", True],
        "other_size": ["reference", True],  # the sizes guard still holds
    }


def test_the_stream_rule_leaves_cpu_calls_alone(tmp_path):
    """A domain with the stream rule on a CPU tensor: the rule is for CUDA tensors only (CPU torch has no CUDA
    streams to ask about), so the call still reaches the candidate."""
    domain = VerifiedDomain.for_device("cpu", "float32", [2], contiguous=False, default_stream=True)
    rw = rewrite_module(USER, "Model", ANY_LAYOUT, domain)
    assert STREAM_CHECK in rw.new_text
    r = run_rewritten(tmp_path, rw, LAYOUT_CASES)
    assert r["contiguous"] == ["optimized", True] and r["transposed"] == ["optimized", True]


# ----------------------------------------------------------------------------- the Accepts carry the domain
TASK_TAIL = textwrap.dedent(
    """

    class ModelNew(Model):
        def forward(self, x):
            rows = x.as_strided(x.shape, (x.shape[1], 1), x.storage_offset())
            return rows * self.scale + 1.0
    """
)
HONEST_TAIL = textwrap.dedent(
    """

    class ModelNew(Model):
        def forward(self, x):
            return x * self.scale + 1.0
    """
)


@pytest.mark.parametrize(
    ("layouts", "tail", "transposed"), [("contiguous", TASK_TAIL, "reference"), ("any", HONEST_TAIL, "optimized")]
)
def test_the_captured_inputs_accept_carries_the_verdicts_domain_into_the_guard(tmp_path, layouts, tail, transposed):
    """The editor's "Optimize (captured inputs)": the run's answer (`answer_of`, its domain read from the verdict)
    is offered as a proposal (`jobs.proposal_of`, the answer's source as `class_source` makes it) and Accept
    rewrites the class from it (`accept._rewrite`): the verdict's layouts reach the rewrite's guard."""
    from forge_lsp.agent.optimize import RunOutcome
    from forge_lsp.agent.store import CandidateRecord
    from forge_lsp.engine import load_task
    from forge_lsp.server.features import jobs
    from forge_lsp.server.features.accept import _rewrite
    from forge_lsp.server.state import BackgroundJob
    from forge_lsp.usecases.model_wide import class_source
    from forge_lsp.usecases.optimize import OptimizeResult, answer_of

    task = tmp_path / "task.py"
    task.write_text(USER)
    answer_source = USER.rstrip() + "\n" + tail
    best = CandidateRecord(
        id="c1",
        run_id="r1",
        parent_id=None,
        seq=1,
        origin="model",
        summary="",
        instruction="",
        source=answer_source,
        source_sha="",
        status="evaluated",
        verdict=verdict(layouts=layouts),
        speedup=2.0,
        correct=True,
    )
    outcome = RunOutcome("r1", "done", "", best, 2.0, 1, 1, 0.0, True, final_speedup=2.0)
    answer, _, _ = answer_of(outcome)
    assert answer is not None and answer.domain.contiguous is (layouts == "contiguous")
    result = OptimizeResult(outcome, load_task(task), answer, None, "")
    user = USER  # the user's file: its class is Model too
    source = class_source(answer.candidate.source, task.read_text(), "Model", user)
    assert source is not None
    job = BackgroundJob(id="j1", kind="optimize", uri="file:///user.py", target="Model", title="")
    prop = jobs.proposal_of(job, "Model", result, "sha", 1, 1, source)
    rw, why = _rewrite(None, prop, user)  # type: ignore[arg-type]
    assert rw is not None, why
    r = run_rewritten(tmp_path, rw, LAYOUT_CASES)
    assert r["contiguous"] == ["optimized", True] and r["transposed"] == [transposed, True], r


def test_the_model_wide_apply_carries_the_answers_domain_into_the_guard(tmp_path):
    """`--model-wide --apply` (`class_edits`): the module's domain, as its run's answer had it, goes into the
    rewrite of the user's class: a transposed input runs the original."""
    from forge_lsp.hotspots.report import HotspotReport, ModuleClass
    from forge_lsp.hotspots.verify import ModelCheck
    from forge_lsp.usecases.model_wide import ModelWideResult, ModuleOutcome, class_edits

    (tmp_path / "user.py").write_text(USER)
    (tmp_path / "task.py").write_text(USER)
    (tmp_path / "answer.py").write_text(USER.rstrip() + "\n" + TASK_TAIL)
    cls = ModuleClass(
        key="user.Model",
        name="Model",
        module="user",
        file=str(tmp_path / "user.py"),
        line=7,
        instances=1,
        calls=1,
        self_ms=1.0,
        total_ms=1.0,
        self_pct=50.0,
        total_pct=50.0,
    )
    mo = ModuleOutcome(
        cls=cls.key,
        name="Model",
        total_pct=50.0,
        task=tmp_path / "task.py",
        status="kept",
        source_file=str(tmp_path / "answer.py"),
        domain=domain_from_verdict(verdict(layouts="contiguous")).model_dump(mode="json"),
    )
    report = HotspotReport(entry="user.py:build", device="cpu", classes=[cls])
    (edit,) = class_edits(ModelWideResult(report=report, modules=[mo], check=ModelCheck(kept=[cls.key])), tmp_path)
    assert edit.new_text is not None, edit.why
    rw = Rewrite(new_text=edit.new_text, start_line=0, end_line=0, replacement="", summary="", class_name="Model")
    r = run_rewritten(tmp_path, rw, LAYOUT_CASES)
    assert r["contiguous"] == ["optimized", True] and r["transposed"] == ["reference", True], r


# ----------------------------------------------------------------------------- the model-wide patch, CPU
NET = textwrap.dedent(
    """
    import torch
    import torch.nn as nn


    class Scale(nn.Module):
        def __init__(self, n=16):
            super().__init__()
            self.scale = nn.Parameter(torch.linspace(0.5, 2.0, n))

        def forward(self, x):
            return x * self.scale + 1.0


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Scale()

        def forward(self, x):
            return self.block(x)


    def build():
        return Net().eval(), (torch.randn(16, 16),)
    """
)
CALL = [{"name": "x", "how": "pos", "tensor": True, "source": None}]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _net(tmp_path: Path):
    (tmp_path / "net.py").write_text(NET)
    return _load(tmp_path / "net.py", f"net_{abs(hash(str(tmp_path)))}")


def _patch(tmp_path: Path, candidate: str, domain: VerifiedDomain | None, name: str = "cand") -> dict:
    path = tmp_path / f"{name}.py"
    path.write_text(candidate)
    patch = {
        "cls": "net.Scale",
        "label": "net.Scale",
        "instances": ["Net.block"],
        "source_file": str(path),
        "call": CALL,
        "output": "tensor",
        "output_spec": "tensor",
    }
    if domain is not None:
        patch["domain"] = domain.model_dump(mode="json")
    return patch


def _routes(model, cases: dict, device: str = "cpu") -> dict:
    """Each case's route through the patched instance and whether its output is the original's."""
    import torch

    calls = model.block.__dict__["_forge_calls"]
    out = {}
    with torch.no_grad():
        for name, call in cases.items():
            before = dict(calls)
            y, a = call()
            if device == "cuda":
                torch.cuda.synchronize()
            route = "reference" if calls["reference"] > before["reference"] else "optimized"
            out[name] = [route, torch.equal(y, type(model.block).forward(model.block, a))]
    return out


def _layout_cases(model) -> dict:
    import torch

    torch.manual_seed(0)
    x, t, small = torch.randn(16, 16), torch.randn(16, 16).t(), torch.randn(8, 16)
    return {
        "contiguous": lambda: (model(x), x),
        "transposed": lambda: (model(t), t),
        "other_size": lambda: (model(small), small),
        "float64": lambda: (model(x.double()), x.double()),
    }


def test_a_patch_verified_on_contiguous_inputs_sends_other_layouts_sizes_and_dtypes_to_the_original(tmp_path):
    """`_shadow`'s domain guard: a transposed input, a size outside the verified ones and another dtype run the
    original forward (with its result); the captured-like contiguous call runs the row-major candidate."""
    from forge_lsp.hotspots.patching import install, uninstall

    net = _net(tmp_path)
    model, _ = net.build()
    domain = domain_from_verdict(verdict(layouts="contiguous"))
    assert install(model, [_patch(tmp_path, ROW_MAJOR, domain)]) == ["Net.block"]
    assert _routes(model, _layout_cases(model)) == {
        "contiguous": ["optimized", True],
        "transposed": ["reference", True],
        "other_size": ["reference", True],
        "float64": ["reference", True],
    }
    uninstall(model)
    assert "forward" not in model.block.__dict__ and "_forge_calls" not in model.block.__dict__


def test_a_patch_verified_on_any_layout_sends_a_transposed_input_to_the_candidate(tmp_path):
    from forge_lsp.hotspots.patching import install

    net = _net(tmp_path)
    model, _ = net.build()
    install(model, [_patch(tmp_path, ANY_LAYOUT, domain_from_verdict(verdict(layouts="any")))])
    routes = _routes(model, _layout_cases(model))
    assert routes["contiguous"] == ["optimized", True] and routes["transposed"] == ["optimized", True]
    assert routes["other_size"] == ["reference", True]  # the sizes guard still holds


def test_a_patch_without_a_domain_is_matched_by_its_shape_as_before(tmp_path):
    """A patch file written before patches carried a domain: every call shaped like the captured one goes to
    the candidate, as it always did; a call unlike it (a keyword argument) still runs the original."""
    from forge_lsp.hotspots.patching import install

    net = _net(tmp_path)
    model, _ = net.build()
    install(model, [_patch(tmp_path, ANY_LAYOUT, None)])
    routes = _routes(model, _layout_cases(model))
    assert all(route == ["optimized", True] for route in routes.values()), routes
    import torch

    x = torch.randn(16, 16)
    assert torch.equal(model.block(x=x), x * model.block.scale + 1.0)
    assert model.block.__dict__["_forge_calls"]["reference"] == 1


def test_the_written_patch_file_carries_the_domain_and_applies_it(tmp_path):
    """`write_patch_file` writes each patch's domain into ``forge_patch.py``; its `apply(model)` keeps the calls
    inside it (`usecases.model_wide._patch` puts the domain in the patch)."""
    import torch

    from forge_lsp.hotspots import parse_entry
    from forge_lsp.hotspots.report import Capture
    from forge_lsp.hotspots.verify import write_patch_file
    from forge_lsp.usecases.model_wide import _patch as model_wide_patch

    net = _net(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "cand.py").write_text(ROW_MAJOR)
    domain = domain_from_verdict(verdict(layouts="contiguous")).model_dump(mode="json")
    capture = Capture(folder="c", call=CALL, output="tensor", output_spec="tensor")
    patch = model_wide_patch("net.Scale", "net.Scale", ["Net.block"], tmp_path / "cand.py", capture, domain)
    assert patch["domain"] == domain
    path = write_patch_file(tmp_path / "out", parse_entry("net.py:build", tmp_path), [patch])
    forge_patch = _load(path, "forge_patch_under_test")
    assert forge_patch.PATCHES[0]["domain"] == domain
    model, _ = net.build()
    assert forge_patch.apply(model) == ["Net.block"]
    routes = _routes(model, _layout_cases(model))
    assert routes["contiguous"] == ["optimized", True] and routes["transposed"] == ["reference", True], routes
    forge_patch.remove(model)
    x = torch.randn(16, 16).t()
    assert torch.equal(model(x), x * model.block.scale + 1.0)


def test_an_answer_carried_over_to_another_variant_is_kept_to_that_variants_captured_call():
    """A carried-over answer keeps the answer's layouts and streams, and is verified (end to end) on its variant's
    captured call only: those are its sizes."""
    from forge_lsp.hotspots.report import Capture, TensorSpec
    from forge_lsp.usecases.model_wide import carried_domain

    main = VerifiedDomain(
        device_types=["cuda"],
        dtypes=["float32"],
        ranks=[3],
        contiguous=False,
        sizes=[[None, [128], [32]]],
        default_stream=True,
    ).model_dump(mode="json")
    capture = Capture(folder="c", inputs=[TensorSpec(name="x", shape=[4, 128, 16], dtype="float32")])
    carried = carried_domain(main, capture)
    assert carried is not None
    assert VerifiedDomain(**carried) == VerifiedDomain(**(main | {"ranks": [3], "sizes": [[[4], [128], [16]]]}))
    assert carried_domain(None, capture) is None


# ----------------------------------------------------------------------------- the stream guards, GPU
STREAM_CASES = """
x = torch.randn(16, 16, device="cuda")
with torch.no_grad():
    route, y = routed(lambda: opt(x))
    report["default_stream"] = [route, torch.equal(y, ref(x))]
    # a side stream whose input is written after a GPU-side delay: work on the default stream would read it early
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)
        xs = x * 2.0
        route, ys = routed(lambda: opt(xs))
    torch.cuda.synchronize()
    report["side_stream"] = [route, torch.equal(ys, ref(x * 2.0))]
    # CUDA-graph capture (warmed up on a side stream first, as torch's documentation does it)
    static_x = x.clone()
    warm = torch.cuda.Stream()
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm):
        opt(static_x)
    torch.cuda.current_stream().wait_stream(warm)
    graph = torch.cuda.CUDAGraph()
    before = dict(new.Model._forge_calls)
    with torch.cuda.graph(graph):
        static_y = opt(static_x)
    captured = "reference" if new.Model._forge_calls["reference"] > before["reference"] else "optimized"
    static_x.copy_(x * 3.0)
    graph.replay()
    torch.cuda.synchronize()
    report["graph_capture"] = [captured, torch.equal(static_y, ref(x * 3.0))]
    route, y = routed(lambda: opt(x))   # and back on the default stream
    report["default_again"] = [route, torch.equal(y, ref(x))]
"""


@pytest.mark.gpu
def test_a_rewrite_verified_on_the_default_stream_sends_side_streams_and_graph_capture_to_the_original(tmp_path):
    """The stream guard: the candidate that runs on the legacy default stream gets calls made on the default
    stream only; a call on a side stream and one during CUDA-graph capture run the original forward, with the
    original's result (the candidate there would read the side stream's input early, or break the capture)."""
    domain = domain_from_verdict(verdict("cuda:0", layouts="any", streams="default"))
    rw = rewrite_module(USER, "Model", DEFAULT_STREAM, domain)
    assert STREAM_CHECK in rw.new_text
    body = "ref, opt = ref.cuda(), opt.cuda()\n" + STREAM_CASES
    r = run_rewritten(tmp_path, rw, body)
    assert r == {
        "default_stream": ["optimized", True],
        "side_stream": ["reference", True],
        "graph_capture": ["reference", True],
        "default_again": ["optimized", True],
    }


@pytest.mark.gpu
def test_a_rewrite_verified_on_any_stream_sends_a_side_stream_call_to_the_candidate(tmp_path):
    rw = rewrite_module(USER, "Model", ANY_LAYOUT, domain_from_verdict(verdict("cuda:0", streams="any")))
    assert STREAM_CHECK not in rw.new_text
    body = """
        ref, opt = ref.cuda(), opt.cuda()
        x = torch.randn(16, 16, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.no_grad(), torch.cuda.stream(side):
            route, y = routed(lambda: opt(x))
        report["side_stream"] = [route, torch.equal(y, ref(x))]
    """
    assert run_rewritten(tmp_path, rw, body) == {"side_stream": ["optimized", True]}


@pytest.mark.gpu
def test_a_patch_verified_on_the_default_stream_sends_side_streams_and_graph_capture_to_the_original(tmp_path):
    """`_shadow`'s stream guard, with the same candidate as a model-wide patch."""
    import torch

    from forge_lsp.hotspots.patching import install

    net = _net(tmp_path)
    model, _ = net.build()
    model = model.cuda()
    domain = domain_from_verdict(verdict("cuda:0", layouts="any", streams="default"))
    assert domain.default_stream
    install(model, [_patch(tmp_path, DEFAULT_STREAM, domain, name="cand_stream")])
    calls = model.block.__dict__["_forge_calls"]
    x = torch.randn(16, 16, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())

    def on_side():
        with torch.cuda.stream(side):
            torch.cuda._sleep(50_000_000)
            xs = x * 2.0
            return model(xs), xs

    routes = _routes(model, {"default_stream": lambda: (model(x), x), "side_stream": on_side}, device="cuda")
    assert routes == {"default_stream": ["optimized", True], "side_stream": ["reference", True]}
    static_x = x.clone()
    with torch.no_grad():
        warm = torch.cuda.Stream()
        warm.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(warm):
            model(static_x)
        torch.cuda.current_stream().wait_stream(warm)
        graph = torch.cuda.CUDAGraph()
        before = dict(calls)
        with torch.cuda.graph(graph):
            static_y = model(static_x)
        assert calls["reference"] == before["reference"] + 1 and calls["optimized"] == before["optimized"]
        static_x.copy_(x * 3.0)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(static_y, type(model.block).forward(model.block, x * 3.0))
    again = _routes(model, {"default_stream": lambda: (model(x), x)}, device="cuda")
    assert again == {"default_stream": ["optimized", True]}


# ----------------------------------------------------------------------------- compiled whole, with forge's answer in
COMPILED_ONCE = """
import torch._dynamo

torch._dynamo.config.error_on_recompile = True  # a second compile of the same frame raises
compiled = torch.compile(opt)
x = torch.randn(16, 16)
with torch.no_grad():
    outs = [compiled(x * (i + 1)) for i in range(12)]
report["match"] = all(torch.allclose(y, ref(x * (i + 1))) for i, y in enumerate(outs))
report["eager_counted"] = dict(new.Model._forge_calls)
with torch.no_grad():
    opt(x)
report["eager_after"] = dict(new.Model._forge_calls)
"""


def test_a_rewritten_class_compiled_whole_is_compiled_once(tmp_path):
    """A user who torch.compiles a model with forge's rewritten class inside: the routing counts are kept for eager
    calls only, so tracing reads none (a count read while tracing becomes a guard on its value: compiled again at
    every call, then run eagerly past dynamo's recompile limit)."""
    rw = rewrite_module(USER, "Model", ANY_LAYOUT, domain_from_verdict(verdict(layouts="any")))
    report = run_rewritten(tmp_path, rw, COMPILED_ONCE)
    assert report["match"], report
    assert report["eager_counted"] == {"optimized": 0, "reference": 0}  # traced calls: not counted
    assert report["eager_after"] == {"optimized": 1, "reference": 0}  # an eager call still is


def test_a_patched_model_compiled_whole_is_compiled_once(tmp_path):
    """`forge_patch.apply(model)` then a whole-forward compile (a model-wide answer with a mode on top, or a user
    compiling the patched model): the shadow's counts are not read while tracing, so the forward compiles once."""
    import torch
    import torch._dynamo

    from forge_lsp.hotspots.patching import compile_model, install, uncompile_model

    net = _net(tmp_path)
    model, _ = net.build()
    install(model, [_patch(tmp_path, ANY_LAYOUT, domain_from_verdict(verdict(layouts="any")))])
    torch._dynamo.reset()
    compile_model(model, "default")
    try:
        with torch._dynamo.config.patch(error_on_recompile=True), torch.no_grad():
            x = torch.randn(16, 16)
            for i in range(12):
                assert torch.allclose(model(x * (i + 1)), type(model.block).forward(model.block, x * (i + 1)))
    finally:
        uncompile_model(model)
    calls = model.block.__dict__["_forge_calls"]
    with torch.no_grad():
        model(torch.randn(16, 16))
    assert calls["optimized"] == 1  # eager again: counted
