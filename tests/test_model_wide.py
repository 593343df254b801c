"""`forge optimize ENTRY --model-wide` on the CPU: hot modules found and captured, each optimized on its captured
inputs (a scripted model on 127.0.0.1), the whole model checked end to end with the replacements in place — a
wrong or slower replacement reverted and said — and the kept ones written as an importable patch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from forge_lsp.hotspots import HotspotOptions, find_hotspots, parse_entry
from forge_lsp.hotspots.extract import extract_tasks
from forge_lsp.hotspots.verify import check_model
from forge_lsp.usecases.model_wide import ModelWideRequest, load_model_wide_results, optimize_model

pytest_plugins = ["fake_openai"]
pytestmark = pytest.mark.slow

MODEL = textwrap.dedent(
    '''
    import torch
    import torch.nn as nn


    class SlowBlock(nn.Module):
        """A projection, then a softmax over each row in a Python loop: slow on purpose."""

        def __init__(self, dim):
            super().__init__()
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            h = self.proj(x)
            rows = h.reshape(-1, h.shape[-1])
            return torch.stack([torch.softmax(r, dim=0) for r in rows]).reshape(h.shape)


    class Net(nn.Module):
        def __init__(self, dim=32):
            super().__init__()
            self.embed = nn.Linear(8, dim)
            self.blocks = nn.ModuleList([SlowBlock(dim) for _ in range(2)])
            self.head = nn.Linear(dim, 4)

        def forward(self, x):
            h = self.embed(x)
            for b in self.blocks:
                h = b(h)
            return self.head(h)


    def build(batch=32):
        torch.manual_seed(0)
        return Net().eval(), (torch.randn(batch, 128, 8),)  # 4096 rows: tens of ms in the loop
    '''
)

FAST = textwrap.dedent(
    """
    import torch
    import torch.nn as nn


    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(32, 32)

        def forward(self, x):
            return torch.softmax(self.proj(x), dim=-1)
    """
)


@pytest.fixture(autouse=True)
def one_openmp_thread(monkeypatch):
    """One OpenMP thread in the workers these tests start. The suite runs more pytest workers than the machine has
    cores, and torch's OpenMP threads spinning on oversubscribed cores slow a vectorized candidate far more than the
    Python-loop reference: FAST, 25× faster than SlowBlock alone, measured 1.1× beside three busy processes on 2
    cores, and the whole model 0.96× (reverted). The decisions were honest; the load made them about threads."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


@pytest.fixture()
def workspace(tmp_path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "slownet.py").write_text(MODEL)
    return tmp_path


def run_probe(probe: str, says: str, timeout: float = 600) -> None:
    """Run `probe` in a fresh Python, as a user's script would use forge's output; it must end well, saying `says`."""
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0 and says in proc.stdout, proc.stderr[-3000:]


def run_patched(folder: Path, patch: Path, module: str, checks: str, says: str) -> None:
    """`run_probe` on the model `module.build()` (a file in `folder`) builds: its output `ref`, then `forge_patch.apply`
    from the patch file `patch`, and its output `out` (both without autograd), then `checks` on them."""
    probe = textwrap.dedent(
        f"""
        import sys, torch
        sys.path.insert(0, {str(folder)!r}); sys.path.insert(0, {str(patch.parent)!r})
        import {module}, forge_patch
        model, (x,) = {module}.build()
        with torch.no_grad():
            ref = model(x)
            forge_patch.apply(model)
            out = model(x)
        """
    )
    run_probe(probe + textwrap.dedent(checks) + f"print({says!r})\n", says)


def _patches(
    workspace: Path, sources: dict[str, str], entry: str = "slownet.py:build", cls: str = "SlowBlock"
) -> tuple:
    """One patch per (name -> candidate source), each for the `cls` instances it names after a ':'."""
    entry = parse_entry(entry, workspace)
    # asked for by name: a lone instance near the 90% share past which it is taken for a wrapper of the whole
    # model is not ranked (ChainNet's Chain crossed it once under load, and nothing was captured)
    report = find_hotspots(entry, workspace, HotspotOptions(device="cpu", warmup=1, iterations=1, classes=(cls,)))
    (task,) = [t for t in extract_tasks(report, workspace).tasks if t.cls.endswith(cls)]
    cap = next(i.capture for i in report.instances if i.name == task.instances[0])
    patches = []
    for label, source in sources.items():
        name, _, which = label.partition(":")
        path = workspace / f"{name}.py"
        path.write_text(task.path.read_text() + "\n" + source)
        patches.append(
            {
                "cls": name,
                "instances": [i for i in task.instances if i.endswith(which)],
                "source_file": str(path),
                "call": [a.model_dump() for a in cap.call],
                "output": cap.output,
            }
        )
    return entry, patches


def _scripted(fake_openai, workspace: Path, entry: str = "slownet.py:build", **kw) -> ModelWideRequest:
    """A model-wide request on the CPU whose one module run asks the scripted model once (no offline seeds)."""
    return ModelWideRequest(
        entry=entry,
        workspace=workspace,
        device="cpu",
        top=1,
        offline=False,
        overrides={"model": "scripted", "base_url": fake_openai.base_url, "search": "linear", "rounds": 1},
        **kw,
    )


TOL = {"float32": [1e-4, 1e-4]}


def test_a_wrong_replacement_is_reverted_and_a_right_one_kept(workspace):
    """Verified or not, a replacement whose model outputs differ is reverted, named, with the worst error."""
    entry, patches = _patches(
        workspace,
        {
            "right:blocks.0": FAST,
            "wrong:blocks.1": FAST.replace("dim=-1)", "dim=-1) * 1.01"),
        },
    )
    check = check_model(entry, workspace, "cpu", patches, TOL, reps=5)
    assert check.kept == ["right"] and [r.cls for r in check.reverted] == ["wrong"]
    # found on the instance itself: the original run on the same call inside the forward, compared
    assert "Net.blocks.1 computes something else" in check.reverted[0].why
    assert check.outputs_match and all(o["max_abs"] < 1e-4 for o in check.outputs)
    assert check.speedup is not None and check.speedup > 1.0  # a Python loop replaced by one softmax


CHAIN = textwrap.dedent(
    """
    import time

    import torch
    import torch.nn as nn


    class Chain(nn.Module):
        \"\"\"Ten steps of a map that amplifies rounding: in bf16, eager's result drifts from the exact one. It waits
        20 ms first: slow on purpose, so the replacement is kept for its speed too.\"\"\"

        def forward(self, x):
            time.sleep(0.02)
            for _ in range(10):
                x = torch.sin(x) * 1.5 + 0.1
            return x


    class ChainNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(16, 16)
            self.chain = Chain()

        def forward(self, x):
            return self.chain(self.lin(x))


    def build():
        torch.manual_seed(0)
        return ChainNet().to(torch.bfloat16).eval(), (torch.randn(64, 16, dtype=torch.bfloat16),)
    """
)

#: the chain computed in fp32 and rounded once (as a fused kernel does): outside bf16's tolerance of eager's
#: result, yet closer to the exact result than eager is
CHAIN_FP32 = textwrap.dedent(
    """
    import torch
    import torch.nn as nn


    class ModelNew(nn.Module):
        def forward(self, x):
            y = x.float()
            for _ in range(10):
                y = torch.sin(y) * 1.5 + 0.1
            return y.to(x.dtype)
    """
)


def test_a_bf16_replacement_is_judged_against_the_model_in_fp32_and_a_wrong_one_still_reverted(workspace):
    """bf16 outputs outside the tolerance of eager's: a replacement whose error against the model run in fp32 is
    within 2x eager's own (at worst and on average) is kept, and says so; one that computes something else (a
    shifted constant) is still reverted."""
    (workspace / "chainnet.py").write_text(CHAIN)
    entry, patches = _patches(
        workspace,
        {"fp32inside:": CHAIN_FP32, "shifted:": CHAIN_FP32.replace("+ 0.1", "+ 0.12")},
        entry="chainnet.py:build",
        cls="Chain",
    )
    tol = {"bfloat16": [1e-2, 1e-2]}
    check = check_model(entry, workspace, "cpu", patches[:1], tol, reps=5)
    assert check.kept == ["fp32inside"] and check.outputs_match, check
    (out,) = check.outputs
    f = out["fp32"]  # judged against fp32 because it was outside the tolerance of eager's result
    assert out["max_abs"] > out["atol"] and f["ok"], out
    assert f["err_max"] < f["eager_err_max"] and f["err_mean"] <= 2 * f["eager_err_mean"], f

    wrong = check_model(entry, workspace, "cpu", patches[1:], tol, reps=5)
    assert wrong.kept == [] and wrong.reverted[0].cls == "shifted", wrong
    assert "differ" in wrong.reverted[0].why or "something else" in wrong.reverted[0].why, wrong.reverted
    assert "(worst " in wrong.reverted[0].why, wrong.reverted


def test_a_revert_for_differing_outputs_says_by_how_much_and_against_fp32():
    """The reason a change is refused carries its worst error and, where the output was judged against the model in
    fp32, its error there next to eager's own (what a user needs to judge the refusal)."""
    from forge_lsp.hotspots.model_check import differ

    rows = [
        {"ok": True, "max_abs": 0.001},
        {"ok": False, "max_abs": 1.5, "fp32": {"err_max": 1.3676, "eager_err_max": 0.3573, "ok": False}},
    ]
    assert differ("the model's outputs differ", rows) == (
        "the model's outputs differ (worst 1.5; against the model in fp32 1.37, eager's own 0.357)"
    )
    assert differ("x", [{"ok": False, "max_abs": 0.25}]) == "x (worst 0.25)"


def test_a_replacement_that_makes_the_model_slower_is_reverted(workspace):
    slow = FAST.replace(
        "        return torch.softmax", "        import time\n        time.sleep(0.4)\n        return torch.softmax"
    )
    entry, patches = _patches(workspace, {"sleepy:blocks.0": slow})
    check = check_model(entry, workspace, "cpu", patches, TOL, reps=5)
    assert check.kept == [] and check.reverted[0].cls == "sleepy" and "slower" in check.reverted[0].why


def test_a_replacements_first_call_is_not_timed_in_every_forward(workspace):
    """A candidate whose first call on each instance costs 0.3 s (as a compiled candidate's first call does), then
    runs 25x faster than the original: the model is timed with its replacements installed once and switched off and
    on around each forward, as a patched model runs. Installed again for each forward, every timed forward was a first
    call, and such a replacement was reverted as slower (a torch.compile candidate: 0.92x where it gives 1.36x)."""
    warms_up = FAST.replace(
        "        return torch.softmax",
        "        if not self.__dict__.get('_warm'):\n"
        "            import time\n"
        "            time.sleep(0.3)\n"
        "            self.__dict__['_warm'] = True\n"
        "        return torch.softmax",
    )
    entry, patches = _patches(workspace, {"warms:blocks.0": warms_up})
    check = check_model(entry, workspace, "cpu", patches, TOL, reps=5)
    assert check.kept == ["warms"], check.reverted
    assert check.speedup is not None and check.ci is not None and check.ci[0] > 1.0, check.decision


AFFINE_NET = textwrap.dedent(
    """
    import torch
    import torch.nn as nn


    class Affine20(nn.Module):
        def forward(self, x):
            for _ in range(20):
                x = x * 1.001 + 0.001
            return x


    class Tail(nn.Module):
        def forward(self, x):
            for _ in range(20):
                x = x * 0.999 - 0.001
            return x


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.hot = Affine20()
            self.tail = Tail()

        def forward(self, x):
            return self.tail(self.hot(x))


    def build():
        torch.manual_seed(0)
        return Net().eval(), (torch.randn(512, 4096),)
    """
)

ONE_PASS = textwrap.dedent(
    """
    import time


    class ModelNew(nn.Module):
        def forward(self, x):
            time.sleep(0.005)  # a fixed cost no whole-forward compile takes away
            a, b = 1.0, 0.0
            for _ in range(20):
                a, b = a * 1.001, b * 1.001 + 0.001
            return x * a + b
    """
)


def test_a_whole_forward_compile_that_beats_the_replacements_is_chosen_without_them(tmp_path):
    """A replacement decidedly faster (one pass for twenty, plus 5 ms), and the whole forward compiled: on top of
    the replacement it keeps the 5 ms; without it, both halves fuse. The modes are also timed without the
    replacements, and the fastest decided configuration is chosen: here the compile alone, the replacement reverted
    with the figures that decided it."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "affine.py").write_text(AFFINE_NET)
    entry, patches = _patches(tmp_path, {"one_pass:hot": ONE_PASS}, entry="affine.py:build", cls="Affine20")
    check = check_model(entry, tmp_path, "cpu", patches, TOL, reps=5, timing_budget_s=8.0, model_modes=("default",))
    rows = [(r["mode"], r.get("replacements", True), r.get("chosen", False)) for r in check.model_modes]
    assert rows == [("default", True, False), ("default", False, True)], check.model_modes
    assert check.modules_speedup is not None and check.modules_speedup > 1.0  # the replacement alone: faster
    assert check.model_mode == "default" and check.model_mode_alone and check.kept == [], check
    (why,) = [r.why for r in check.reverted]
    assert why.startswith("the whole model compiled in mode 'default' without it is faster: "), why
    alone = check.model_modes[1]
    assert check.speedup == alone["speedup"] > check.modules_speedup and alone["ci"][0] > 1.0
    assert check.reps == alone["reps"]  # the forwards said beside the chosen speedup are the ones it was timed on


@pytest.fixture()
def load():
    """Processes that take the CPU in bursts of random length: the noise of a user's laptop, on every core."""
    code = (
        "import random, time\n"
        "while True:\n"
        "    end = time.perf_counter() + random.uniform(0.0, 0.05)\n"
        "    while time.perf_counter() < end: pass\n"
        "    time.sleep(random.uniform(0.0, 0.05))\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(os.cpu_count() or 2)]
    yield procs
    for p in procs:
        p.kill()
        p.wait()


def test_under_load_a_replacement_no_faster_is_never_kept_and_the_check_says_why(workspace, load):
    """The original's own code plus 2 ms per call, timed on a loaded machine within a small budget: slower, or
    equal within 1%, or undecided (then inconclusive, with the noise) — never kept, and no patch to write."""
    original = MODEL.split("class SlowBlock(nn.Module):")[1].split("class Net")[0]
    body = original.replace("h = self.proj(x)", "time.sleep(0.002)\n        h = self.proj(x)")
    slower = "\nimport time\n\n\nclass ModelNew(nn.Module):" + body.replace("(self, dim):", "(self, dim=32):")
    entry, patches = _patches(workspace, {"slower:blocks.0": slower})
    check = check_model(entry, workspace, "cpu", patches, TOL, reps=10, timing_budget_s=8.0)
    assert check.kept == [] and check.outcome in ("nothing_kept", "inconclusive"), check
    (why,) = [r.why for r in check.reverted]
    assert why.startswith(
        (
            "the whole model is slower with it: slower:",
            "the whole model is no faster with it: equal:",
            "the whole model is not decidedly faster",
        )
    ), why
    assert check.decision is not None and check.decision["outcome"] in ("slower", "equal", "inconclusive")
    if check.outcome == "inconclusive":
        assert "inconclusive: timing noise of" in why
    assert check.speedup is None  # nothing kept: no speedup claimed
    # the threads it was timed with, fitted to the cores the check's process got (fewer on a busy CPU)
    assert check.cpu is not None and (check.cpu.fitted or check.cpu.threads) >= 1, check.cpu
    assert (check.cpu.cores or 0.0) > 0 or check.cpu.threads == 1, check.cpu  # probed unless one thread


def test_a_model_wide_outcome_is_kept_only_with_a_patch_and_inconclusive_is_said():
    from forge_lsp.hotspots import HotspotReport
    from forge_lsp.hotspots.verify import ModelCheck
    from forge_lsp.usecases.model_wide import ModelWideResult

    report = HotspotReport.model_construct()
    undecided = ModelCheck(outcome="inconclusive", decision={"outcome": "inconclusive", "noise_pct": 41.0})
    assert ModelWideResult(report=report, modules=[], check=undecided).outcome == "inconclusive"
    assert ModelWideResult(report=report, modules=[], check=ModelCheck()).outcome == "nothing_kept"
    kept = ModelWideResult(report=report, modules=[], check=ModelCheck(outcome="kept"), patch_file=Path("p.py"))
    assert kept.outcome == "kept" and kept.to_json()["outcome"] == "kept"
    from forge_lsp.cli.optimize_cmd import MODEL_WIDE_EXIT

    assert MODEL_WIDE_EXIT == {"kept": 0, "nothing_kept": 1, "inconclusive": 3, "interrupted": 130}


def test_model_wide_optimizes_the_hot_module_checks_the_model_and_writes_a_patch(workspace, fake_openai):
    fake_openai.script(json.dumps({"summary": "one vectorized softmax", "source": FAST}))
    said: list[str] = []
    result = optimize_model(
        _scripted(fake_openai, workspace, reps=20),
        say=said.append,
    )
    # the module's run is said as it goes, not only when it ends
    assert any(line.startswith("  SlowBlock: round 1/1") for line in said), said
    (module,) = result.modules
    assert module.name == "SlowBlock" and module.status == "kept", module
    # kept: its interval lies above 1 (its median is 2-8x alone, near 1.5x beside a loaded suite)
    assert module.speedup is not None and module.speedup > 1.0 and module.run_id
    assert sorted(module.instances) == ["Net.blocks.0", "Net.blocks.1"]
    check = result.check
    assert check is not None and check.outputs_match and check.kept == [module.cls]
    # the loop of 4096 softmaxes is gone from both blocks: the median forward is faster (its interval is wide on
    # a loaded 2-core machine, so only the median is held here)
    assert check.speedup is not None and check.speedup > 1.0 and check.ci is not None, check
    assert result.patch_file is not None and result.patch_file.is_file()
    # the run is kept whole for reports and the editor: read back, it says what the run said
    (saved,) = load_model_wide_results(workspace)
    assert saved.folder == result.patch_file.parent and saved.patch_file == result.patch_file
    assert [(m.name, m.status, m.run_id, m.speedup) for m in saved.modules] == [
        (module.name, "kept", module.run_id, module.speedup)
    ]
    assert saved.check == check and saved.report.entry == result.report.entry
    # the user's side: import the patch, apply it to the model the entry builds
    probe = textwrap.dedent(
        f"""
        import sys, torch
        sys.path.insert(0, {str(workspace)!r}); sys.path.insert(0, {str(result.patch_file.parent)!r})
        import slownet, forge_patch
        model, (x,) = slownet.build()
        with torch.no_grad():
            ref = model(x)
            replaced = forge_patch.apply(model)
            got = model(x)
        assert sorted(replaced) == ["Net.blocks.0", "Net.blocks.1"], replaced
        assert all("_forge_candidate" in model.blocks[i].__dict__ for i in range(2))
        assert sorted(model.state_dict()) == sorted(slownet.build()[0].state_dict())  # the model's own state
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)
        # each patch carries the domain its answer was verified on, and the shadowed forward keeps calls inside it
        domain = forge_patch.PATCHES[0]["domain"]
        assert all(p["domain"] == domain for p in forge_patch.PATCHES) and domain["dtypes"] == ["float32"], domain
        calls = model.blocks[0].__dict__["_forge_calls"]
        assert calls["optimized"] >= 1 and calls["reference"] == 0, calls  # the model's own calls: the candidate
        with torch.no_grad():
            strided = torch.randn(32, 32, 128).transpose(1, 2)  # the captured call's shape, not contiguous
            y = model.blocks[0](strided)
            torch.testing.assert_close(y, type(model.blocks[0]).forward(model.blocks[0], strided))
        assert calls["reference"] == (1 if domain["contiguous"] else 0), (calls, domain)
        forge_patch.remove(model)
        assert "forward" not in model.blocks[0].__dict__
        print("applied")
        """
    )
    run_probe(probe, "applied", timeout=300)


def test_cli_model_wide_says_when_nothing_is_faster(workspace):
    """No model and (on purpose) no offline candidates: nothing to replace, said, the exit status 1."""
    proc = subprocess.run(
        [sys.executable, "-m", "forge_lsp.cli.main", "optimize", "slownet.py:build", "--model-wide", "--device", "cpu"]
        + ["--no-offline", "--top", "1", "--quiet"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=workspace,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]  # nothing kept: 1 (kept: 0, inconclusive: 3)
    assert "SlowBlock" in proc.stdout and "the model is unchanged" in proc.stdout, proc.stdout
    assert "outcome: nothing kept" in proc.stdout, proc.stdout
    (saved,) = load_model_wide_results(workspace)
    assert saved.check is None and saved.patch_file is None and saved.modules[0].name == "SlowBlock"
    assert any("the model is unchanged" in n for n in saved.notes)


def test_a_script_entry_is_optimized_model_wide_on_the_scripts_own_model_and_call(workspace, fake_openai):
    """A script (the model built and run by the user's own code, with its arguments): the hot spots are found
    while it runs, and the end-to-end check runs it again up to its model's first forward, then checks and times
    the replacements on that model and that call."""
    (workspace / "infer.py").write_text(
        "import sys\nimport torch\nimport slownet\n\n"
        "model, (x,) = slownet.build(batch=int(sys.argv[1]))\n"
        "with torch.no_grad():\n"
        "    for _ in range(3):\n"
        "        y = model(x)\n"
        "print('done', tuple(y.shape))\n"
    )
    fake_openai.script(json.dumps({"summary": "one vectorized softmax", "source": FAST}))
    result = optimize_model(_scripted(fake_openai, workspace, "infer.py 16", reps=10))
    (module,) = result.modules
    assert module.name == "SlowBlock" and module.status == "kept", module
    check = result.check
    assert check is not None and check.kept == [module.cls] and check.outputs_match
    # the script's own call: its batch of 16 (from its argument), not a shape forge made up
    assert check.outputs[0]["shape"] == [16, 128, 4], check.outputs
    assert result.patch_file is not None and result.patch_file.is_file()


def test_a_script_that_never_runs_its_model_is_said():
    """The check child on a script whose model never runs forward: a clear error, not a hang."""
    import tempfile

    from forge_lsp.hotspots.verify import ModelCheckError

    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
        (root / "noforward.py").write_text("import torch\nmodel = torch.nn.Linear(2, 2)\nprint('built only')\n")
        entry = parse_entry("noforward.py", root)
        with pytest.raises(ModelCheckError, match="ended without a forward of its model Linear"):
            check_model(entry, root, "cpu", [], TOL, reps=2, root="Linear")


VARIANTS = (
    MODEL.replace(
        "        self.blocks = nn.ModuleList([SlowBlock(dim) for _ in range(2)])\n",
        "        self.blocks = nn.ModuleList([SlowBlock(dim) for _ in range(2)] + [SlowBlock(16)])\n",
    )
    .replace(
        "        self.head = nn.Linear(dim, 4)\n",
        "        self.head = nn.Linear(16, 4)\n",
    )
    .replace(
        "        for b in self.blocks:\n            h = b(h)\n",
        "        for b in self.blocks[:2]:\n            h = b(h)\n        h = self.blocks[2](h[..., :16].contiguous())\n",
    )
)
assert VARIANTS.count("SlowBlock(16)") == 1 and "self.blocks[2]" in VARIANTS


#: a candidate as forge's offline ones are: the task's source, then a ModelNew subclassing its Model
SUBCLASS = """

class ModelNew(Model):
    def forward(self, x):
        return torch.softmax(self.proj(x), dim=-1)
"""


def test_an_answer_is_carried_over_to_the_class_instances_built_differently_and_each_is_checked(workspace):
    """SlowBlock(32) x2 and SlowBlock(16): two tasks of one class. A candidate that subclasses the task's model
    carries over to the other variant (its own task's source in place) and each instance is checked on the call
    it gets inside the forward; one that holds the main variant's sizes is reverted for the other, with why."""
    from forge_lsp.usecases.model_wide import _patch, carry_over

    (workspace / "slownet.py").write_text(VARIANTS)
    entry = parse_entry("slownet.py:build", workspace)
    report = find_hotspots(entry, workspace, HotspotOptions(device="cpu", warmup=1, iterations=1))
    (task,) = [t for t in extract_tasks(report, workspace).tasks if t.cls.endswith("SlowBlock")]
    assert sorted(task.instances) == ["Net.blocks.0", "Net.blocks.1"]
    (variant,) = task.variants
    assert variant.instances == ["Net.blocks.2"] and variant.path.name == "SlowBlock__2.py"
    assert "super().__init__(16)" in variant.path.read_text()
    main_text = task.path.read_text().rstrip()
    good = main_text + SUBCLASS
    carried = carry_over(good, main_text, variant.path.read_text())
    assert carried is not None and carried.startswith(variant.path.read_text().rstrip()) and carried.endswith(SUBCLASS)
    assert carry_over(FAST, main_text, variant.path.read_text()) is None  # not the task's source plus a ModelNew
    # one written with the main variant's sizes: its state cannot load into the 16-wide instance
    sized = main_text + "\n" + FAST
    cap = {i.name: i.capture for i in report.instances}
    patches = []
    for label, text, names in (
        ("main", good, task.instances),
        ("main@2", carried, variant.instances),
    ):
        path = workspace / f"{label.replace('@', '_')}.py"
        path.write_text(text)
        patches.append(_patch("SlowBlock", label, names, path, cap[names[0]]))
    check = check_model(entry, workspace, "cpu", patches, TOL, reps=5)
    assert sorted(check.kept) == ["main", "main@2"] and check.reverted == [], check
    assert check.outputs_match and check.speedup is not None and check.speedup > 1.0
    bad = carry_over(sized, main_text, variant.path.read_text())
    assert bad is not None
    (workspace / "bad.py").write_text(bad)
    patches[1] = _patch("SlowBlock", "main@2", variant.instances, workspace / "bad.py", cap["Net.blocks.2"])
    check = check_model(entry, workspace, "cpu", patches, TOL, reps=5)
    assert check.kept == ["main"] and [r.cls for r in check.reverted] == ["main@2"]
    assert "state does not load" in check.reverted[0].why


FUSABLE = textwrap.dedent(
    """
    import torch
    import torch.nn as nn


    class Chain(nn.Module):
        \"\"\"Twenty elementwise ops: twenty passes over the tensor in eager, one when compiled.\"\"\"

        def forward(self, x):
            for i in range(20):
                x = torch.sin(x) * 0.5 + x * 0.25
            return x


    def build():
        return Chain().eval(), (torch.randn(512, 8192),)
    """
)


def test_the_whole_forward_compiled_on_top_is_checked_timed_and_written_into_the_patch(tmp_path):
    """No module replacement, model_modes=("default",): the compiled forward's outputs are compared with the
    original's and timed against an untouched copy; chosen only when faster with its interval above 1; the patch
    then compiles the user's own model object in place, and remove() undoes it."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "chain.py").write_text(FUSABLE)
    entry = parse_entry("chain.py:build", tmp_path)
    check = check_model(entry, tmp_path, "cpu", [], TOL, reps=10, model_modes=("default",))
    (row,) = check.model_modes
    assert row["mode"] == "default" and row["ok"] and all(o["ok"] for o in row["outputs"]), row
    assert row["speedup"] is not None and row["ci"] is not None
    assert check.kept == [] and check.modules_speedup is None
    # twenty fused passes: a clear win even on a loaded 2-core machine
    assert check.model_mode == "default" and check.speedup == row["speedup"] and check.ci[0] > 1.0, row
    from forge_lsp.hotspots.verify import write_patch_file

    patch = write_patch_file(tmp_path / "out", entry, [], check.model_mode)
    probe = textwrap.dedent(
        f"""
        import sys, torch
        sys.path.insert(0, {str(tmp_path)!r}); sys.path.insert(0, {str(patch.parent)!r})
        import chain, forge_patch
        model, (x,) = chain.build()
        ref = model(x)
        forge_patch.apply(model)
        assert "forward" in model.__dict__
        torch.testing.assert_close(model(x), ref, atol=1e-5, rtol=1e-5)
        forge_patch.remove(model)
        assert "forward" not in model.__dict__
        print("compiled in place")
        """
    )
    run_probe(probe, "compiled in place")


CONVNET = textwrap.dedent(
    """
    import torch
    import torch.nn as nn


    class ConvBlock(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv = nn.Conv2d(c, c, 3, padding=1)
            self.bn = nn.BatchNorm2d(c)

        def forward(self, x):
            return torch.relu(self.bn(self.conv(x))) + x


    class ConvNet(nn.Module):
        def __init__(self, c=16):
            super().__init__()
            self.stem = nn.Conv2d(3, c, 3, padding=1)
            self.blocks = nn.Sequential(*[ConvBlock(c) for _ in range(2)])
            self.head = nn.Linear(c, 10)

        def forward(self, x):
            h = self.blocks(self.stem(x))
            return self.head(h.mean(dim=(2, 3)))


    def build():
        torch.manual_seed(0)
        return ConvNet().eval(), (torch.randn(4, 3, 32, 32),)
    """
)


def test_mode_names_join_known_parts_and_refuse_conflicts():
    from forge_lsp.hotspots.patching import mode_error

    for ok in (
        "default",
        "channels_last",
        "channels_last+default",
        "cuda_graphs",
        "blocks",
        "channels_last+blocks",
        "cuda_graphs+default",
        "channels_last+cuda_graphs+max-autotune-no-cudagraphs",
        "default+eager_casts",
        "reduce-overhead+eager_casts",
        "blocks+eager_casts",
    ):
        assert mode_error(ok) is None, ok
    assert "modifies a compile" in mode_error("eager_casts")
    assert "modifies a compile" in mode_error("channels_last+cuda_graphs+eager_casts")
    assert "unknown mode 'fast'" in mode_error("channels_last+fast")
    assert "two torch.compile modes" in mode_error("default+reduce-overhead")
    assert "not with a whole-forward compile" in mode_error("blocks+default")
    assert "records CUDA graphs itself" in mode_error("cuda_graphs+reduce-overhead")
    assert "names a part twice" in mode_error("blocks+blocks")


def test_whole_model_transforms_are_checked_end_to_end_and_written_into_the_patch(tmp_path):
    """channels_last, the hot blocks compiled one by one, and both, on a small convolutional model on the CPU: each
    mode's outputs against the original's and its time decided as any replacement's; a mode that does not apply
    (CUDA graphs on the CPU; channels_last without a convolution) is said with its reason. The patch file puts the
    chosen transform on the user's own model object (same parameters, same outputs) and remove() undoes it."""
    from forge_lsp.hotspots.verify import write_patch_file

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "convnet.py").write_text(CONVNET)
    entry = parse_entry("convnet.py:build", tmp_path)
    blocks = ("ConvNet.blocks.0", "ConvNet.blocks.1")
    modes = ("channels_last", "blocks", "channels_last+blocks", "cuda_graphs")
    check = check_model(entry, tmp_path, "cpu", [], TOL, reps=5, timing_budget_s=5, model_modes=modes, blocks=blocks)
    rows = {r["mode"]: r for r in check.model_modes}
    assert list(rows) == list(modes), rows
    for mode in ("channels_last", "blocks", "channels_last+blocks"):
        row = rows[mode]
        assert row["ok"] and all(o["ok"] for o in row["outputs"]), row
        assert row["decision"] in ("faster", "slower", "equal", "inconclusive") and row["says"], row
    assert not rows["cuda_graphs"]["ok"] and "not on a CUDA device" in rows["cuda_graphs"]["why"], rows["cuda_graphs"]
    if check.model_mode is not None:  # chosen only when decidedly faster
        assert rows[check.model_mode]["decision"] == "faster" and rows[check.model_mode]["ci"][0] > 1.0

    # no convolution: channels_last does not apply, and says so
    (tmp_path / "chain.py").write_text(FUSABLE.replace("range(20)", "range(2)").replace("(512, 8192)", "(8, 64)"))
    plain = check_model(
        parse_entry("chain.py:build", tmp_path), tmp_path, "cpu", [], TOL, reps=3, model_modes=("channels_last",)
    )
    (row,) = plain.model_modes
    assert not row["ok"] and "has no 2-D convolution" in row["why"], row

    patch = write_patch_file(tmp_path / "out", entry, [], "channels_last+blocks", blocks)
    probe = textwrap.dedent(
        f"""
        import sys, torch
        sys.path.insert(0, {str(tmp_path)!r}); sys.path.insert(0, {str(patch.parent)!r})
        import convnet, forge_patch
        model, (x,) = convnet.build()
        with torch.no_grad():
            ref = model(x)
            params = [id(p) for p in model.parameters()]
            forge_patch.apply(model)
            assert model.stem.weight.is_contiguous(memory_format=torch.channels_last)
            assert all("forward" in b.__dict__ for b in model.blocks), "each block compiled on its own"
            torch.testing.assert_close(model(x), ref, atol=1e-4, rtol=1e-4)
            assert [id(p) for p in model.parameters()] == params, "the same parameters"
            forge_patch.remove(model)
            assert "forward" not in model.__dict__ and not any("forward" in b.__dict__ for b in model.blocks)
            assert model.stem.weight.is_contiguous()
            torch.testing.assert_close(model(x), ref)
        print("transformed in place and back")
        """
    )
    run_probe(probe, "transformed in place and back")


DRIFTS = textwrap.dedent(
    """
    import torch
    import torch.nn as nn


    class Good(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(64, 64)

        def forward(self, x):
            return torch.tanh(self.fc(x)) + x


    class Drifts(nn.Module):
        \"\"\"Computes something else once compiled (a stand-in for a region whose compiled error is not eager's).\"\"\"

        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(64, 64)

        def forward(self, x):
            y = torch.tanh(self.fc(x)) + x
            return y + 0.5 if torch.compiler.is_compiling() else y


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = Good()
            self.b = Drifts()
            self.c = Good()

        def forward(self, x):
            return self.c(self.b(self.a(x)))


    def build():
        torch.manual_seed(0)
        return Net().eval(), (torch.randn(16, 64),)
    """
)


def test_blocks_whose_compiled_outputs_drift_are_left_eager_and_the_patch_compiles_only_the_others(tmp_path):
    """The "blocks" mode: with every hot block compiled the model's outputs differ, so blocks are compiled one at a
    time in the model's order, each kept only while the outputs hold; the mode is checked and timed with those, says
    which were left eager, and the patch file compiles exactly them."""
    from forge_lsp.hotspots.verify import write_patch_file

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "drifts.py").write_text(DRIFTS)
    entry = parse_entry("drifts.py:build", tmp_path)
    blocks = ("Net.a", "Net.b", "Net.c")
    check = check_model(
        entry, tmp_path, "cpu", [], TOL, reps=5, timing_budget_s=5, model_modes=("blocks",), blocks=blocks
    )
    (row,) = check.model_modes
    assert row["ok"] and row["blocks"] == ["Net.a", "Net.c"], row
    assert row["note"].startswith("2 of 3 hot blocks compiled, the others left eager (with every hot block"), row
    assert all(o["ok"] for o in row["outputs"]) and row["decision"] in ("faster", "slower", "equal", "inconclusive"), (
        row
    )
    if check.model_mode == "blocks":
        assert check.model_blocks == ["Net.a", "Net.c"]
    patch = write_patch_file(tmp_path / "out", entry, [], "blocks", tuple(row["blocks"]))
    checks = """
        assert ["forward" in m.__dict__ for m in (model.a, model.b, model.c)] == [True, False, True]
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
        """
    run_patched(tmp_path, patch, "drifts", checks, "compiled a and c")


ROUNDS = textwrap.dedent(
    """
    import torch
    import torch.nn as nn


    class Rounds(nn.Module):
        # what eager's rounding of x * c to bf16 changed, scaled: a plain compile fuses the product into the
        # subtraction without that rounding, so its output is all zeros where eager's is not
        def __init__(self):
            super().__init__()
            self.c = nn.Parameter(torch.tensor(1.2345, dtype=torch.bfloat16))

        def forward(self, x):
            assert x.dtype == torch.bfloat16, "this model runs in bf16 only"  # no fp32 judgement: the tolerance decides
            return (((x * self.c).float() - x.float() * self.c.float()) * 1000).bfloat16()


    def build():
        torch.manual_seed(0)
        return Rounds().eval(), (torch.randn(64, 4096, dtype=torch.bfloat16),)
    """
)


def test_a_compile_that_leaves_eagers_bf16_outputs_is_tried_again_keeping_eagers_roundings(tmp_path):
    """A bf16 model whose plain compile computes something else than eager (it skips a rounding eager does): the
    compile is refused with its figures, tried again as "default+eager_casts" (inductor's emulate_precision_casts),
    whose outputs are eager's; the patch compiles the user's model that way and matches eager exactly."""
    from forge_lsp.hotspots.verify import write_patch_file

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "rounds.py").write_text(ROUNDS)
    entry = parse_entry("rounds.py:build", tmp_path)
    check = check_model(entry, tmp_path, "cpu", [], TOL, reps=5, timing_budget_s=5, model_modes=("default",))
    rows = {r["mode"]: r for r in check.model_modes}
    assert list(rows) == ["default", "default+eager_casts"], check.model_modes
    assert not rows["default"]["ok"] and rows["default"]["why"].startswith("the model's outputs differ (worst "), rows
    again = rows["default+eager_casts"]
    assert again["ok"] and [o["max_abs"] for o in again["outputs"]] == [0.0], again
    assert again["decision"] in ("faster", "slower", "equal", "inconclusive") and again["speedup"] is not None, again
    assert "runs in bf16 only" in check.fp32_note, check.fp32_note
    patch = write_patch_file(tmp_path / "out", entry, [], "default+eager_casts")
    checks = """
        assert "forward" in model.__dict__ and bool(ref.abs().max() > 1), ref.abs().max()
        assert torch.equal(out, ref), (out - ref).abs().max()
        """
    run_patched(tmp_path, patch, "rounds", checks, "eager's roundings kept")


def _row(mode: str, speedup: float, after_ms: float, **extra) -> dict:
    return {"mode": mode, "ok": True, "decision": "faster", "speedup": speedup, "after_ms": after_ms, **extra}


def test_of_two_faster_configurations_the_one_faster_in_milliseconds_is_raced_and_kept_only_if_it_wins():
    """Each mode's speedup is against the original timed beside it, whose own time moves with what runs beside it.
    So a mode with a lower ratio but fewer milliseconds (GPT-2 bf16 on the H100: reduce-overhead 2.54x at 3.78 ms,
    default 2.72x at 4.33 ms) is raced against the best ratio, and kept only when the race's interval says so."""
    from forge_lsp.hotspots.decide import decide
    from forge_lsp.hotspots.model_check import pick

    def race_of(after_a: float, after_b: float, jitter: float):
        raced = []

        def race(a, b):
            raced.append((a["mode"], b["mode"]))
            it = iter(range(10_000))

            def sample(n):
                wobble = [jitter * ((next(it) * 7919) % 13 - 6) / 6 for _ in range(n)]
                return [after_a + w for w in wobble], [after_b - w for w in wobble]

            return decide(sample, 30, 5.0, clock=lambda: 0.0)

        return race, raced

    def rows():
        return [
            _row("default", 2.72, 4.33),
            _row("reduce-overhead", 2.54, 3.78),
            _row("blocks", 1.43, 6.42),
            {"mode": "channels_last", "ok": False, "why": "not tried: the model has no 2-D convolution"},
            _row("default", 2.8, 4.5, decision="inconclusive"),
        ]

    race, raced = race_of(4.33, 3.78, 0.05)  # the rival is faster head to head: kept, and both rows say why
    table = rows()
    chosen = pick(table, race)
    assert raced == [("default", "reduce-overhead")] and chosen is table[1], chosen
    assert chosen["race"]["outcome"] == "faster" and chosen["race"]["against"] == "default", chosen
    assert chosen["note"].startswith(
        "timed head to head against default: reduce-overhead faster: 1.14× (99% CI 1.13-1.16"
    )
    assert table[0]["note"].startswith("timed head to head against reduce-overhead: reduce-overhead faster: 1.14×")
    assert "race" not in table[0]

    race, raced = race_of(4.0, 4.0, 1.5)  # a race the noise leaves open: the best ratio stays
    table = rows()
    chosen = pick(table, race)
    assert chosen is table[0] and chosen["race"]["outcome"] == "inconclusive", chosen
    assert "reduce-overhead inconclusive: timing noise" in chosen["note"], chosen["note"]

    race, raced = race_of(3.0, 4.0, 0.05)  # the rival is slower head to head: the best ratio stays
    table = rows()
    assert pick(table, race) is table[0] and table[0]["race"]["outcome"] == "slower"

    def no_room(a, b):
        raise RuntimeError("CUDA out of memory")

    table = rows()  # a race that cannot run (two more copies of the model do not fit): the best ratio stays, said
    assert pick(table, no_room) is table[0] and "race" not in table[0]
    assert table[0]["note"] == "reduce-overhead ran fewer milliseconds but could not be timed against it (RuntimeError)"

    race, raced = race_of(0, 0, 0)  # the best ratio is also the fewest milliseconds: no race
    table = [_row("default", 2.72, 3.5), _row("reduce-overhead", 2.54, 3.78)]
    assert pick(table, race) is table[0] and raced == [] and "note" not in table[0]
    assert pick([{"mode": "default", "ok": False}], race) is None


@pytest.mark.parametrize(
    ("device", "b_mode"),
    [("cpu", "default+eager_casts"), pytest.param("cuda", "reduce-overhead", marks=pytest.mark.gpu)],
)
def test_a_race_times_two_configurations_each_on_its_own_copy_of_the_model(device, b_mode):
    """`_race` on a real model: each configuration set up on its own deep copy (the original left untouched, a row
    without the replacements left without them), both compiled and timed alternating, decided by the same rule. In
    a process of its own, as the model check runs it: torch.compile's state stays out of the test process. On a GPU,
    against a mode that records CUDA graphs."""
    probe = (
        textwrap.dedent(
            """
        import types, torch
        from forge_lsp.hotspots.model_check import _race

        class Chain(torch.nn.Module):
            def forward(self, x):
                for _ in range(12):
                    x = torch.tanh(x * 1.01 + 0.1)
                return x

        original, args = Chain().eval().to(DEVICE), (torch.randn(256, 1024, device=DEVICE),)
        req = types.SimpleNamespace(device=DEVICE, blocks=())
        a, b = {"mode": "default", "replacements": False}, {"mode": B_MODE}
        d = _race(torch, req, original, [], args, {}, a, b, 10, 3.0)
        assert d.outcome in ("faster", "slower", "equal", "inconclusive") and d.pairs >= 10 and d.speedup is not None, d
        assert "forward" not in original.__dict__ and "_forge_compiled_mode" not in original.__dict__
        print("raced", d.says())
        """
        )
        .replace("DEVICE", repr(device))
        .replace("B_MODE", repr(b_mode))
    )
    run_probe(probe, "raced")


@pytest.mark.gpu
def test_cuda_graphs_replay_the_forward_per_input_signature_and_match_eager():
    """On a GPU: the forward recorded once per input signature and replayed (outputs copied out, so a later replay
    does not overwrite them), the same outputs as eager for each signature, eager when autograd records."""
    import torch

    from forge_lsp.hotspots.patching import compile_model, uncompile_model

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(8)]).cuda().eval()
    xs = [torch.randn(8, 256, device="cuda"), torch.randn(16, 256, device="cuda")]
    with torch.no_grad():
        refs = [model(x) for x in xs]
        compile_model(model, "cuda_graphs")
        graphed = model.__dict__["_forge_graphed"]
        outs = [model(x) for x in xs] + [model(x) for x in xs]
        assert len(graphed.graphs) == 2 and all(g is not None for g in graphed.graphs.values()), graphed.failures
    for out, ref in zip(outs, refs + refs, strict=True):
        torch.testing.assert_close(out, ref)
    assert outs[0].data_ptr() != outs[2].data_ptr()  # copied out of the graph's memory
    y = model(xs[0].requires_grad_())  # autograd records: eager
    assert y.grad_fn is not None and len(graphed.graphs) == 2
    uncompile_model(model)
    assert "forward" not in model.__dict__


def test_a_mode_that_does_not_apply_is_said_not_fatal(tmp_path):
    """reduce-overhead wants CUDA graphs: on the CPU it either runs (torch falls back) or is said with the reason;
    the check finishes either way."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "chain.py").write_text(FUSABLE.replace("range(20)", "range(2)").replace("(512, 8192)", "(8, 64)"))
    entry = parse_entry("chain.py:build", tmp_path)
    check = check_model(entry, tmp_path, "cpu", [], TOL, reps=3, model_modes=("reduce-overhead",))
    (row,) = check.model_modes
    assert row["mode"] == "reduce-overhead" and (row["ok"] or row["why"]), row


def test_cancel_stops_the_module_run_in_flight(workspace, fake_openai):
    """Cancel while a module is being optimized (its model call in flight): the module's run is stopped at once
    (the call is not waited for, no candidate is evaluated), marked interrupted in the run store, and the model-wide
    run saves what it has (state "interrupted") without checking anything."""
    import threading
    import time

    from forge_lsp.usecases.model_wide import RunInterrupted
    from forge_lsp.usecases.runs import workspace_store

    # a model that does not answer before the cancel
    fake_openai.script({"delay": 8.0, "content": json.dumps({"summary": "one vectorized softmax", "source": FAST})})
    cancel = threading.Event()
    said: list[str] = []

    cancelled_at: list[float] = []

    def cancel_now() -> None:
        cancelled_at.append(time.monotonic())
        cancel.set()

    def cancel_once_optimizing(line: str) -> None:
        said.append(line)
        if line.startswith("  SlowBlock:") and not cancelled_at:
            threading.Timer(1.0, cancel_now).start()

    with pytest.raises(RunInterrupted, match="interrupted: 0 of 1") as stopped:
        optimize_model(
            _scripted(fake_openai, workspace),
            say=cancel_once_optimizing,
            cancel=cancel,
        )
    # it ends at the cancel: the model call in flight (its reply 8 s away) is abandoned, its request closed
    assert cancel.is_set() and time.monotonic() - cancelled_at[0] < 6, said
    assert not any(line.startswith("checking the whole model") for line in said), said
    assert not (workspace / ".forge" / "model_wide" / "checks").exists()
    (saved,) = load_model_wide_results(workspace)
    assert saved.state == "interrupted" and saved.outcome == "interrupted" and saved.patch_file is None
    (module,) = saved.modules
    assert module.status == "interrupted" and module.run_id is None  # its run id is the store's
    store = workspace_store(workspace)
    assert store is not None and [r.status for r in store.list_runs()] == ["interrupted"]
    assert stopped.value.result.folder == saved.folder


TWO_HOT = MODEL.replace("        self.head = nn.Linear(dim, 4)", "        self.head = SlowHead(dim)").replace(
    "class Net(nn.Module):",
    '''class SlowHead(nn.Module):
    """A projection to 4, then a ReLU of each row in a Python loop: slow on purpose too."""

    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, 4)

    def forward(self, h):
        rows = self.proj(h).reshape(-1, 4)
        return torch.stack([torch.relu(r) for r in rows]).reshape(*h.shape[:-1], 4)


class Net(nn.Module):''',
)


def test_an_interrupted_run_is_resumed_without_redoing_its_finished_modules(tmp_path, fake_openai):
    """Two hot classes; the run is stopped as the second's run starts. Saved: the first module's answer and patch,
    the second marked interrupted. `resume` takes the first as it is (no model call, the same run) and runs the
    second, then checks the whole model, in the same folder."""
    import threading

    from forge_lsp.usecases.model_wide import RunInterrupted
    from forge_lsp.usecases.runs import workspace_store

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "slownet.py").write_text(TWO_HOT)
    fake_openai.script(json.dumps({"summary": "one vectorized softmax", "source": FAST}))
    cancel = threading.Event()

    def stop_at_the_second(line: str) -> None:
        if line.startswith("optimizing SlowHead"):
            cancel.set()

    request = _scripted(fake_openai, tmp_path, reps=10)
    request = ModelWideRequest(**{**request.__dict__, "top": 2})
    with pytest.raises(RunInterrupted, match="interrupted: 1 of 2"):
        optimize_model(request, say=stop_at_the_second, cancel=cancel)
    (saved,) = load_model_wide_results(tmp_path)
    assert saved.state == "interrupted" and [m.name for m in saved.modules] == ["SlowBlock", "SlowHead"]
    first, second = saved.modules
    assert first.status == "kept" and first.run_id and second.status == "interrupted"
    assert len(saved.patches) == 1 and saved.patches[0]["cls"] == first.cls
    store = workspace_store(tmp_path)
    assert store is not None and sorted(r.status for r in store.list_runs()) == ["done", "interrupted"]

    fake_openai.script("not json: no candidate this time")
    said: list[str] = []
    resumed = ModelWideRequest(**{**request.__dict__, "entry": None, "resume": "latest"})
    result = optimize_model(resumed, say=said.append)
    assert "SlowBlock: kept (finished before the interruption)" in said, said
    assert result.folder == saved.folder and result.state == "finished"
    again, head = result.modules
    assert again.run_id == first.run_id and again.status == "kept"  # not redone
    assert head.status != "interrupted" and head.run_id, head
    assert result.check is not None and first.cls in result.check.kept
    assert len(store.list_runs()) == 3  # the first module's run, the interrupted one, and the second's new run
    (final,) = load_model_wide_results(tmp_path)
    assert final.state == "finished" and final.outcome == "kept"
    with pytest.raises(Exception, match="no interrupted model-wide run"):
        optimize_model(resumed, say=said.append)  # a finished run is not resumed


def test_cli_sigterm_saves_the_run_says_how_to_resume_and_resume_finishes_it(workspace, fake_openai):
    """`forge optimize --model-wide` stopped by SIGTERM while its module's model call is in flight: exit status 130,
    the resume command said, the run saved as interrupted (`forge report --model-wide latest` renders it); then
    `--resume latest` finishes it."""
    import signal
    import time

    fake_openai.script({"delay": 30.0, "content": json.dumps({"summary": "one vectorized softmax", "source": FAST})})
    cli = [sys.executable, "-m", "forge_lsp.cli.main", "optimize"]
    flags = ["--model-wide", "--device", "cpu", "--no-offline", "--top", "1", "--model", "scripted"]
    flags += ["--base-url", fake_openai.base_url, "--search", "linear", "--rounds", "1"]
    proc = subprocess.Popen(
        [*cli, "slownet.py:build", *flags], cwd=workspace, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    lines = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        lines.append(line)
        if line.startswith("optimizing SlowBlock") or not line:
            break
    time.sleep(2.0)  # its model call is in flight
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    err = "".join(lines) + err
    assert proc.returncode == 130, err[-3000:]
    assert "--resume" in err and "interrupted: 0 of 1 hot module(s) finished" in err, err[-3000:]
    (saved,) = load_model_wide_results(workspace)
    assert saved.state == "interrupted" and saved.modules[0].status == "interrupted"
    report = subprocess.run(
        [sys.executable, "-m", "forge_lsp.cli.main", "report", "--model-wide", "latest", "--output", "mw.html"],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.returncode == 0 and (workspace / "mw.html").is_file(), report.stderr[-2000:]

    fake_openai.script("not json: no candidate")
    done = subprocess.run(
        [*cli, *flags, "--resume", "latest"], cwd=workspace, capture_output=True, text=True, timeout=600
    )
    assert done.returncode in (0, 1), done.stderr[-3000:]
    assert "resuming" in done.stderr and "outcome:" in done.stdout, done.stdout[-2000:]
    (final,) = load_model_wide_results(workspace)
    assert final.state == "finished" and final.folder == saved.folder


def test_a_module_run_over_its_budget_is_stopped_and_the_model_still_checked(workspace, fake_openai):
    """--module-budget: a module's run still going at its budget (here its model call has not returned) is
    stopped at once, said as over_budget with where it was, and the model-wide run goes on to its end; the
    result read back from result.json says the same, with the seconds the run took."""
    import time

    fake_openai.script({"delay": 20.0, "content": json.dumps({"summary": "one vectorized softmax", "source": FAST})})
    said: list[str] = []
    t0 = time.monotonic()
    # 6 s: past the reference check and into the model call even on a loaded machine
    request = _scripted(fake_openai, workspace, reps=5, module_budget_s=6.0)
    result = optimize_model(request, say=said.append)
    (module,) = result.modules
    assert module.status == "over_budget", module
    assert "module budget (6 s)" in module.reason and "round 1/1" in module.reason, module.reason
    assert module.seconds is not None and 6.0 <= module.seconds < 18.0, module.seconds
    # stopped at the budget, not when the model call would have returned
    assert time.monotonic() - t0 < 60, said
    assert any("stopped at the module budget" in line for line in said), said
    # the model-wide run went on to its end: nothing to check, the model unchanged, the result saved
    assert result.check is None and any("the model is unchanged" in n for n in result.notes), result.notes
    (saved,) = load_model_wide_results(workspace)
    assert [(m.status, m.seconds) for m in saved.modules] == [("over_budget", module.seconds)]


def test_a_kept_answer_rewrites_the_users_own_class_guarded(workspace, fake_openai):
    """`--model-wide --apply`: a kept answer whose class is defined in the workspace's file is written into that
    class by the guarded rewrite. The class keeps its name, constructor and state; calls like the verified ones
    (32 wide) run the answer, the model's outputs stay the original's, and FORGE_DISABLE=1 runs the original."""
    import os

    import torch

    from forge_lsp.usecases.model_wide import apply_class_edits

    def answer(_request: dict) -> str:  # the model replies with the extracted task's source plus a subclass
        task_text = (workspace / ".forge" / "tasks" / "SlowBlock.py").read_text().rstrip()
        return json.dumps({"summary": "one softmax per call, as a subclass", "source": task_text + SUBCLASS})

    fake_openai.script(answer)
    before = (workspace / "slownet.py").read_text()
    result = optimize_model(_scripted(fake_openai, workspace, reps=10))
    (module,) = result.modules
    assert module.status == "kept" and module.domain and module.candidate_id, module
    (edit,) = apply_class_edits(result, workspace)
    assert edit.new_text is not None and edit.path == (workspace / "slownet.py").resolve(), edit
    after = (workspace / "slownet.py").read_text()
    assert after != before and "forge: begin optimized SlowBlock" in after and "class SlowBlock(" in after
    probe = textwrap.dedent(
        f"""
        import sys, torch
        sys.path.insert(0, {str(workspace)!r})
        import slownet
        model, (x,) = slownet.build()
        with torch.no_grad():
            y = model(x)
        ran = ["_forge_runtime" in b.__dict__ for b in model.blocks]
        torch.save(y, sys.argv[1])
        print("ran", ran)
        """
    )
    outs = {}
    for label, extra in (("forge", {}), ("original", {"FORGE_DISABLE": "1"})):
        path = workspace / f"{label}.pt"
        proc = subprocess.run(
            [sys.executable, "-c", probe, str(path)],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, **extra},
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        outs[label] = (proc.stdout, torch.load(path))
    assert "ran [True, True]" in outs["forge"][0], outs["forge"][0]  # the answer ran in both blocks
    assert "ran [False, False]" in outs["original"][0], outs["original"][0]
    torch.testing.assert_close(outs["forge"][1], outs["original"][1], atol=1e-5, rtol=1e-5)

    # undo is one step: refused while the file holds an edit of its own (nothing changed), then every file put back
    from forge_lsp.usecases import UseCaseError
    from forge_lsp.usecases.model_wide import undo_applied

    (workspace / "slownet.py").write_text(after + "\n# mine\n")
    with pytest.raises(UseCaseError, match="changed since run .* rewrote it; nothing was undone"):
        undo_applied(workspace)
    assert (workspace / "slownet.py").read_text() == after + "\n# mine\n"
    (workspace / "slownet.py").write_text(after)
    cli = [
        sys.executable,
        "-m",
        "forge_lsp.cli.main",
        "optimize",
        "--undo-apply",
        "latest",
        "--workspace",
        str(workspace),
    ]
    proc = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "put back" in proc.stdout and "slownet.py" in proc.stdout, proc.stdout + proc.stderr
    assert (workspace / "slownet.py").read_text() == before
    again = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert again.returncode == 1 and "has edits to undo" in again.stderr, again.stderr


def test_a_library_class_is_not_rewritten_and_says_why(workspace):
    """A kept module of a class outside the workspace (torchvision's, transformers'): no edit, the reason."""
    from forge_lsp.hotspots.report import HotspotReport, ModuleClass
    from forge_lsp.hotspots.verify import ModelCheck
    from forge_lsp.usecases.model_wide import ModelWideResult, ModuleOutcome, class_edits

    cls = ModuleClass(
        key="torchvision.models.resnet.Bottleneck",
        name="Bottleneck",
        module="torchvision.models.resnet",
        file="/usr/lib/python3/site-packages/torchvision/models/resnet.py",
        line=108,
        instances=16,
        calls=16,
        self_ms=1.0,
        total_ms=10.0,
        self_pct=5.0,
        total_pct=84.0,
    )
    report = HotspotReport(entry="m.py:build", device="cpu", classes=[cls])
    mo = ModuleOutcome(
        cls=cls.key,
        name="Bottleneck",
        total_pct=84.0,
        task=workspace / "t.py",
        status="kept",
        source_file=str(workspace / "c.py"),
    )
    result = ModelWideResult(report=report, modules=[mo], check=ModelCheck(kept=[cls.key]))
    (edit,) = class_edits(result, workspace)
    assert edit.new_text is None and "not defined in a file of the workspace" in edit.why


@pytest.mark.integration
def test_a_patched_instance_runs_the_original_under_autograd_and_follows_its_weights(workspace):
    """The candidate was verified without autograd: with autograd recording (training, fine-tuning) the shadowed
    forward runs the original, so gradients reach the instance's own parameters. Weights loaded into the model
    after `apply` (a checkpoint, an optimizer step) are the ones the candidate computes with; weights no longer
    dense send calls to the original."""
    _, patches = _patches(workspace, {"fast:blocks.0": FAST})
    probe = textwrap.dedent(
        f"""
        import sys, torch
        sys.path.insert(0, {str(workspace)!r})
        import slownet
        from forge_lsp.hotspots.patching import install
        model, (x,) = slownet.build(batch=2)
        block = model.blocks[0]
        install(model, {patches!r})
        calls = block.__dict__["_forge_calls"]
        original = lambda h: type(block).forward(block, h)
        h = model.embed(x).detach()
        with torch.no_grad():
            torch.testing.assert_close(block(h), original(h), atol=1e-5, rtol=1e-5)
        assert calls == {{"optimized": 1, "reference": 0}}, calls
        y = block(h)  # autograd records: the original
        assert calls["reference"] == 1 and y.grad_fn is not None, calls
        y.sum().backward()
        assert block.proj.weight.grad is not None
        with torch.no_grad():  # new weights in place, as load_state_dict or an optimizer step writes them
            for p in block.parameters():
                p.mul_(1.5).add_(0.1)
            torch.testing.assert_close(block(h), original(h), atol=1e-5, rtol=1e-5)
        assert calls["optimized"] == 2, calls
        with torch.no_grad():  # weights no longer dense (as a memory-format conversion leaves them): the original
            block.proj.weight.data = block.proj.weight.data.t().contiguous().t()
            torch.testing.assert_close(block(h), original(h), atol=1e-5, rtol=1e-5)
        assert calls == {{"optimized": 2, "reference": 2}}, calls
        print("followed")
        """
    )
    run_probe(probe, "followed")
