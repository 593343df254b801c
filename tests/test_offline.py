"""Offline candidates on the CPU: the graph probe (a subprocess), matching, generated sources,
and every library candidate verified by the real engine under the Triton interpreter."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT

from forge_lsp.agent.offline import (
    COMPILE_MODES,
    OfflineCandidate,
    candidates_for,
    match_graph,
    probe_task,
    probe_tasks,
)
from forge_lsp.agent.offline.generate import library_text
from forge_lsp.engine import Candidate, Status, load_task

OFFLINE = FIXTURES / "offline"

#: fixture -> (op kinds the probe must report, library candidates expected, ops of each)
EXPECTED = {
    "softmax_task": (["mul", "softmax"], {"library:softmax": ["softmax"]}),
    "group_norm_task": (["group_norm"], {"library:group_norm": ["group_norm"]}),
    "layer_norm_task": (["layer_norm", "mul", "layer_norm"], {"library:layer_norm": ["layer_norm"]}),
    "rms_norm_task": (["rms_norm"], {"library:rms_norm": ["rms_norm"]}),
    "rms_norm_explicit_task": (["pow", "mean", "add", "rsqrt", "mul", "mul"], {"library:rms_norm": ["rms_norm"]}),
    "linear_gelu_task": (["linear", "gelu"], {"library:linear_act": ["linear", "gelu"]}),
    "conv_bias_relu_task": (["add", "relu"], {"library:bias_act": ["add", "relu"]}),
    "avgpool_task": (
        ["adaptive_avg_pool2d", "adaptive_avg_pool2d"],
        {"library:adaptive_avg_pool2d": ["adaptive_avg_pool2d"]},
    ),
    "multi_task": (
        ["layer_norm", "linear", "silu", "linear", "softmax"],
        {
            "library:softmax": ["softmax"],
            "library:layer_norm": ["layer_norm"],
            "library:linear_act": ["linear", "silu"],
            "library:all": ["layer_norm", "linear", "silu", "softmax"],
        },
    ),
    "unsupported_task": ([], {}),
    "untraceable_task": ([], {}),
}

BROKEN = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        raise ValueError("this constructor always fails")


def get_inputs():
    return [torch.randn(2, 2)]


def get_init_inputs():
    return []
"""


@pytest.fixture(scope="module")
def probed(cache_dir, tmp_path_factory):
    """All fixture tasks (and a broken one) probed in ONE child process; the modules this
    test process held before, to check the probe imported no task module here."""
    before = set(sys.modules)
    broken = tmp_path_factory.mktemp("offline") / "broken_task.py"
    broken.write_text(BROKEN)
    tasks = {name: load_task(OFFLINE / f"{name}.py") for name in EXPECTED}
    tasks["broken_task"] = load_task(broken)
    reports = probe_tasks(list(tasks.values()), device="cpu", cache_dir=cache_dir, timeout=180)
    return {name: (task, rep) for (name, task), rep in zip(tasks.items(), reports, strict=True)}, before


def _task_modules(tasks) -> list[str]:
    """Modules of these tasks in this process: the engine's exec_module names a task module
    forge_task_<sha256(source)[:16]>_<name>; a plain import would come from the fixture folder."""
    prefixes = tuple(f"forge_task_{hashlib.sha256(t.source.encode()).hexdigest()[:16]}" for t in tasks)
    out = []
    for name, mod in list(sys.modules.items()):
        path = str(getattr(mod, "__file__", "") or "")
        if name.startswith(prefixes) or (path and Path(path).resolve().parent == OFFLINE.resolve()):
            out.append(name)
    return out


# ----------------------------------------------------------------------------- probe
@pytest.mark.integration
def test_probe_runs_in_a_subprocess_not_in_the_caller(probed):
    reports, before = probed
    assert _task_modules([task for task, _ in reports.values()]) == []
    new = set(sys.modules) - before
    # (this file's own library test imports `forge_offline_library_under_test` here, maybe meanwhile under xdist)
    executed = [m for m in new if m.startswith("forge_") and m != "forge_offline_library_under_test"]
    assert not executed, "the probe executed task code in this process"
    assert all(rep.ok for name, (_, rep) in reports.items() if name != "broken_task")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_probe_reports_the_ops_of_each_fixture(probed, name):
    _, rep = probed[0][name]
    kinds, _ = EXPECTED[name]
    assert rep.kinds == kinds, rep.error
    if name == "untraceable_task":
        assert rep.ok and not rep.traced and "symbolic_trace failed" in rep.error
    else:
        assert rep.traced and rep.shapes, rep.error


def test_probe_records_arguments_modules_and_shapes(probed):
    reports = probed[0]
    soft = reports["softmax_task"][1].node("softmax")
    assert soft.op == "call_function" and soft.kwargs == {"dim": 1} and soft.shape == [12, 100]
    gn = reports["group_norm_task"][1].node("norm")
    assert gn.op == "call_module" and gn.module["attrs"] == {
        "num_groups": 4,
        "num_channels": 8,
        "eps": 1e-5,
        "affine": True,
    }
    assert gn.module["params"] == {"weight": [8], "bias": [8]}
    bias = reports["conv_bias_relu_task"][1].node("bias")
    assert bias.op == "get_attr" and bias.attr == {"shape": [4, 1, 1], "dtype": "float32", "kind": "parameter"}
    ln = reports["layer_norm_task"][1].node("layer_norm")
    assert ln.args == [{"node": "mul"}, [32]] and ln.kwargs == {"weight": None, "bias": None, "eps": 1e-6}


@pytest.mark.integration  # starts a process
def test_probe_reports_a_broken_task_and_a_timeout(probed, cache_dir):
    _, rep = probed[0]["broken_task"]
    assert not rep.ok and not rep.traced and "this constructor always fails" in rep.error
    task = load_task(OFFLINE / "softmax_task.py")
    slow = probe_task(task, device="cpu", cache_dir=cache_dir, timeout=0.01)
    assert not slow.ok and "did not finish within" in slow.error
    assert match_graph(slow) == []


# ----------------------------------------------------------------------------- candidates
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_library_candidates_per_fixture(probed, name):
    task, rep = probed[0][name]
    _, libs = EXPECTED[name]
    cands = [c for c in candidates_for(task, rep, device="cpu") if c.origin == "library"]
    assert {c.name: c.ops for c in cands} == libs
    for c in cands:
        assert c.source.startswith(task.source.rstrip())  # the task's own source, then the generated part
        assert "class ModelNew(Model):" in c.source and c.summary
        ast.parse(c.source)
        assert Candidate.from_source(c.source, c.name).backend.value == "triton"


def test_matches_cover_every_instance(probed):
    reports = probed[0]
    assert [m.nodes for m in match_graph(reports["layer_norm_task"][1])] == [["ln"], ["layer_norm"]]
    assert [m.args[1] for m in match_graph(reports["avgpool_task"][1])] == [[1, 1], [3, 2]]
    explicit = match_graph(reports["rms_norm_explicit_task"][1])
    assert len(explicit) == 1 and explicit[0].nodes == ["pow_1", "mean", "add", "rsqrt", "mul", "mul_1"]
    assert explicit[0].args == [{"node": "x"}, [40], {"node": "weight"}, 1e-5]
    lin = match_graph(reports["linear_gelu_task"][1])
    assert lin[0].args == [{"node": "x"}, {"attr": "fc.weight"}, {"attr": "fc.bias"}, "gelu"]


@pytest.mark.parametrize(
    "device,modes", [("cuda", list(COMPILE_MODES)), ("cuda:1", list(COMPILE_MODES)), ("cpu", ["default"])]
)
def test_torch_compile_variants_by_device(probed, device, modes):
    for name in ("softmax_task", "untraceable_task", "broken_task"):  # offered even without a graph
        task, rep = probed[0][name]
        comp = [c for c in candidates_for(task, rep, device=device) if c.origin == "torch.compile"]
        assert [c.name for c in comp] == [f"torch.compile:{m}" for m in modes]
        for c, mode in zip(comp, modes, strict=True):
            ast.parse(c.source)
            assert c.source.startswith(task.source.rstrip()) and "class ModelNew(Model):" in c.source
            assert f"torch.compile(super().forward, mode={mode!r})" in c.source.replace("_forge_torch.", "torch.")
            assert ("cudagraph_mark_step_begin" in c.source) == (mode == "reduce-overhead")


@pytest.mark.integration
def test_offline_candidates_never_import_torch_or_the_task_in_the_caller(cache_dir):
    code = textwrap.dedent(f"""
        import json, sys
        from pathlib import Path
        from forge_lsp.engine import load_task
        from forge_lsp.agent.offline import offline_candidates
        cands = offline_candidates(load_task({str(OFFLINE / "multi_task.py")!r}), device="cpu", library=True,
                                   cache_dir=Path({str(cache_dir)!r}))
        loaded = [m for m in ("torch", "triton") if m in sys.modules]
        tasks = [m for m in sys.modules if m.startswith("forge_task_")]
        print(json.dumps({{"names": [c.name for c in cands], "loaded": loaded, "tasks": tasks}}))
    """)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, timeout=180
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["loaded"] == [] and got["tasks"] == []
    assert got["names"] == [
        "library:softmax",
        "library:layer_norm",
        "library:linear_act",
        "library:all",
        "torch.compile:default",
    ]


# ----------------------------------------------------------------------------- the engine's verdict
LIBRARY_CASES = [(name, cand) for name, (_, libs) in EXPECTED.items() for cand in libs]


def _strict(source: str) -> str:
    """The same candidate with every torch fallback turned into an error: proves the kernels ran."""
    old = "    return op(*args, **kwargs)\n"
    assert source.count(old) == 1
    return source.replace(old, "    raise AssertionError('forge offline library: torch fallback taken')\n")


@pytest.mark.parametrize("name,cand_name", LIBRARY_CASES, ids=[f"{n}-{c}" for n, c in LIBRARY_CASES])
@pytest.mark.slow
def test_library_candidate_is_correct_in_the_engine(probed, cpu_evaluator, name, cand_name):
    task, rep = probed[0][name]
    cand = next(c for c in candidates_for(task, rep, device="cpu") if c.name == cand_name)
    opts = cpu_evaluator.options.model_copy(update={"timing": False})
    for source in (cand.source, _strict(cand.source)):
        v = cpu_evaluator.evaluate(task, Candidate.from_source(source, cand_name.replace(":", "_")), opts)
        assert v.status is Status.correct, v.reason + v.traceback + v.log_excerpt
        assert v.checkpoint_compatible is True
        assert {c.name for c in v.checks if c.passed} >= {
            "outputs_match",
            "no_monkeypatch",
            "checkpoint_compatible",
            "repeatable",
            "inputs_unchanged",
            "no_output_aliasing",
        }


@pytest.mark.integration  # starts a process
def test_a_changed_graph_fails_loudly(probed, cpu_evaluator):
    task, rep = probed[0]["softmax_task"]
    cand = next(c for c in candidates_for(task, rep, device="cpu") if c.name == "library:softmax")
    broken = cand.source.replace(
        "'expect': [['call_function', 'softmax']]", "'expect': [['call_function', 'log_softmax']]"
    )
    assert broken != cand.source
    v = cpu_evaluator.evaluate(
        task, Candidate.from_source(broken, "changed"), cpu_evaluator.options.model_copy(update={"timing": False})
    )
    assert v.status is Status.runtime_error and "differs from the probed one" in v.reason


STATE_DICT_SCRIPT = """
import importlib.util, json, pickle, sys
import torch
out = {}
for i, path in enumerate(sys.argv[1:]):
    spec = importlib.util.spec_from_file_location(f"cand{i}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    init = mod.get_init_inputs()
    ref, new = mod.Model(*init), mod.ModelNew(*init)
    out[path] = [list(ref.state_dict()), list(new.state_dict()), [n for n, _ in new.named_modules()],
                 [n for n, _ in ref.named_modules()]]
    new.load_state_dict(ref.state_dict(), strict=True)
    again = pickle.loads(pickle.dumps(new))  # the generated forward is rebuilt after unpickling
    inputs = mod.get_inputs()
    with torch.no_grad():
        for a, b in zip(torch.utils._pytree.tree_leaves(ref(*inputs)), torch.utils._pytree.tree_leaves(again(*inputs))):
            torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
print(json.dumps(out))
"""


@pytest.mark.slow
def test_library_candidates_keep_the_reference_state_dict_keys_and_pickle(probed, tmp_path):
    paths = []
    for name, cand_name in LIBRARY_CASES:
        task, rep = probed[0][name]
        cand = next(c for c in candidates_for(task, rep, device="cpu") if c.name == cand_name)
        p = tmp_path / f"{name}_{cand_name.replace(':', '_')}.py"
        p.write_text(cand.source)
        paths.append(str(p))
    env = dict(os.environ, TRITON_INTERPRET="1", TRITON_CACHE_DIR=str(tmp_path / "triton"))
    out = subprocess.run(
        [sys.executable, "-c", STATE_DICT_SCRIPT, *paths], capture_output=True, text=True, env=env, timeout=180
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    for path in paths:
        ref_keys, new_keys, new_modules, ref_modules = got[path]
        assert new_keys == ref_keys, path
        assert new_modules == ref_modules, path  # no GraphModule registered as a submodule
    assert ["scale"] in [got[p][0] for p in paths]  # the softmax fixture's buffer is kept too


@pytest.mark.slow
def test_torch_compile_default_is_correct_in_the_engine(probed, cpu_evaluator):
    task, rep = probed[0]["group_norm_task"]
    cand = next(c for c in candidates_for(task, rep, device="cpu") if c.name == "torch.compile:default")
    v = cpu_evaluator.evaluate(
        task,
        Candidate.from_source(cand.source, "compile_default"),
        cpu_evaluator.options.model_copy(update={"timing": False}),
    )
    # torch._dynamo rebinds torch.manual_seed when imported; the worker imports it before its
    # monkeypatch snapshot, so this is not blamed on the candidate
    assert v.status is Status.correct, v.reason + v.traceback + v.log_excerpt
    assert v.checkpoint_compatible is True


@pytest.mark.slow
def test_torch_compile_default_matches_the_reference_when_run_directly(probed, tmp_path):
    task, rep = probed[0]["group_norm_task"]
    cand = next(c for c in candidates_for(task, rep, device="cpu") if c.name == "torch.compile:default")
    path = tmp_path / "compile_default.py"
    path.write_text(cand.source)
    script = textwrap.dedent("""
        import importlib.util, sys
        import torch
        spec = importlib.util.spec_from_file_location("compile_default", sys.argv[1])
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        ref = mod.Model(*mod.get_init_inputs())
        new = mod.ModelNew(*mod.get_init_inputs())
        new.load_state_dict(ref.state_dict(), strict=True)
        assert list(new.state_dict()) == list(ref.state_dict())
        with torch.no_grad():
            for _ in range(2):
                x = mod.get_inputs()[0]
                torch.testing.assert_close(new(x), ref(x), atol=1e-5, rtol=1e-5)
        assert "_forge_compiled" in new.__dict__
        print("ok")
    """)
    out = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor")),
    )
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


# ----------------------------------------------------------------------------- kernels, directly
@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    """The library as candidates inline it, loaded here under the Triton interpreter, with
    every torch fallback recorded."""
    import torch  # noqa: F401 - the kernels need it; the task modules are never imported here

    old = {k: os.environ.get(k) for k in ("TRITON_INTERPRET", "TRITON_CACHE_DIR")}
    folder = tmp_path_factory.mktemp("offline_lib")
    os.environ["TRITON_INTERPRET"] = "1"
    os.environ["TRITON_CACHE_DIR"] = str(folder / "triton")
    files = [
        "common.py",
        "softmax.py",
        "seg_norm.py",
        "layer_norm.py",
        "rms_norm.py",
        "group_norm.py",
        "adaptive_avg_pool2d.py",
        "bias_act.py",
    ]
    path = folder / "forge_offline_library.py"
    path.write_text("\n\n".join(library_text(f) for f in files))
    spec = importlib.util.spec_from_file_location("forge_offline_library_under_test", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    mod.fallbacks = []
    original = mod._forge_fallback

    def record(op, *args, **kwargs):
        mod.fallbacks.append(getattr(op, "__name__", str(op)))
        return original(op, *args, **kwargs)

    mod._forge_fallback = record
    yield mod
    sys.modules.pop(spec.name, None)
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _close(got, want, dtype):
    import torch

    tol = 1e-5 if dtype == torch.float32 else 2e-2
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.float(), want.float(), atol=tol, rtol=tol)


class _Launches:
    """Records which library kernels a call launched (wraps the kernels in the module's globals)."""

    def __init__(self, lib):
        self.lib, self.names = lib, []

    def __enter__(self):
        self.saved = {k: v for k, v in vars(self.lib).items() if k.startswith("_forge_") and k.endswith("_kernel")}
        for name, kernel in self.saved.items():
            setattr(self.lib, name, self._wrap(name, kernel))
        return self.names

    def _wrap(self, name, kernel):
        names = self.names

        class Proxy:
            def __getitem__(self, grid):
                names.append(name.removeprefix("_forge_").removesuffix("_kernel"))
                return kernel[grid]

        return Proxy()

    def __exit__(self, *exc):
        for name, kernel in self.saved.items():
            setattr(self.lib, name, kernel)


def _run(lib, fn, *args, launches=None, **kwargs):
    """Call a library wrapper; it must not fall back to torch, and (if given) must launch `launches`."""
    lib.fallbacks.clear()
    with _Launches(lib) as names:
        out = fn(*args, **kwargs)
    assert lib.fallbacks == [], f"fell back to torch: {lib.fallbacks}"
    if launches is not None:
        assert names == launches
    return out


DTYPES = ["float32", "float16", "bfloat16"]


@pytest.mark.integration
@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_kernels(lib, dtype):
    import torch

    dt = getattr(torch, dtype)
    torch.manual_seed(0)
    x = (torch.randn(37, 10) * 4).to(dt)  # short rows, several per program, a partial last tile
    _close(_run(lib, lib.forge_softmax, x, -1, launches=["softmax_rows"]), torch.softmax(x.float(), -1).to(dt), dt)
    y = (torch.randn(3, 4, 300) * 4).to(dt)
    y[0, 0, 17] = float("-inf")
    ref = torch.softmax(y.float(), 2).to(dt)
    _close(_run(lib, lib.forge_softmax, y, 2, launches=["softmax_rows"]), ref, dt)
    online = ["softmax_online"]
    _close(_run(lib, lib.forge_softmax, y, -1, _max_block=64, _chunk=64, launches=online), ref, dt)  # 5 chunks a row
    # few long rows: each row split across programs, (max, sum) partials merged (forced, then automatic)
    split = ["softmax_partial", "softmax_split_apply"]
    _close(_run(lib, lib.forge_softmax, y, -1, _max_block=64, _split=3, _chunk=32, launches=split), ref, dt)
    _close(_run(lib, lib.forge_softmax, y[:1, :2], -1, _max_block=64, _chunk=32, launches=split), ref[:1, :2], dt)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.slow
def test_layer_norm_kernels(lib, dtype):
    import torch
    import torch.nn.functional as F

    dt = getattr(torch, dtype)
    torch.manual_seed(1)
    x = (torch.randn(5, 4, 6) * 3 + 10).to(dt)  # mean far from 0: checks the variance numerics
    w, b = (torch.rand(4, 6) + 0.5).to(dt), torch.randn(4, 6).to(dt)
    ref = F.layer_norm(x.float(), (4, 6), w.float(), b.float(), 1e-5).to(dt)
    _close(_run(lib, lib.forge_layer_norm, x, (4, 6), w, b, 1e-5, launches=["layer_norm_rows"]), ref, dt)
    z = (torch.randn(3, 200) * 2 + 5).to(dt)
    for weight, bias in (
        (None, None),
        (torch.rand(200).to(dt), None),
        (torch.rand(200).to(dt), torch.randn(200).to(dt)),
    ):
        ref = F.layer_norm(
            z.float(), (200,), None if weight is None else weight.float(), None if bias is None else bias.float(), 1e-6
        ).to(dt)
        _close(_run(lib, lib.forge_layer_norm, z, [200], weight, bias, 1e-6), ref, dt)
        # a Welford loop per row; then rows split across programs (few rows: automatic)
        for kw, launches in (
            ({"_split": 1, "_block": 32}, ["seg_fused"]),
            ({"_block": 32}, ["seg_partial", "seg_split_apply"]),
        ):
            _close(
                _run(lib, lib.forge_layer_norm, z, [200], weight, bias, 1e-6, _max_block=64, launches=launches, **kw),
                ref,
                dt,
            )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.slow
def test_rms_norm_kernels(lib, dtype):
    import torch
    import torch.nn.functional as F

    dt = getattr(torch, dtype)
    torch.manual_seed(2)
    x = torch.randn(7, 130).to(dt)
    w = (torch.rand(130) + 0.5).to(dt)
    for eps in (None, 1e-6):
        ref = F.rms_norm(x.float(), (130,), w.float(), eps if eps is not None else torch.finfo(dt).eps).to(dt)
        _close(_run(lib, lib.forge_rms_norm, x, (130,), w, eps, launches=["rms_norm_rows"]), ref, dt)
        for kw, launches in (
            ({"_split": 1, "_block": 16}, ["seg_fused"]),
            ({"_block": 16}, ["seg_partial", "seg_split_apply"]),
            ({"_split": 2, "_block": 64}, ["seg_partial", "seg_split_apply"]),
        ):
            _close(_run(lib, lib.forge_rms_norm, x, (130,), w, eps, _max_block=32, launches=launches, **kw), ref, dt)
    _close(_run(lib, lib.forge_rms_norm, x, [130], None, 1e-5), F.rms_norm(x.float(), (130,), None, 1e-5).to(dt), dt)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.slow
def test_group_norm_kernels(lib, dtype):
    import torch
    import torch.nn.functional as F

    dt = getattr(torch, dtype)
    torch.manual_seed(3)
    fused, split = ["seg_fused"], ["seg_partial", "seg_split_apply"]
    cases = [
        ((8, 8, 3, 3), 4, {}, fused),  # 32 groups fill the (4-"SM") interpreter: fused, flat walk (small planes)
        ((2, 6, 8, 8), 3, {"_split": 1, "_block": 64}, fused),  # fused kernel, per-channel walk, several chunks
        ((1, 4, 10, 10), 2, {"_split": 4, "_block": 16}, split),  # split reduction, partial last slice
        ((2, 6, 17), 2, {"_block": 8}, split),  # (N, C, L): few groups, split automatically, flat walk
    ]
    for shape, groups, kw, launches in cases:
        c = shape[1]
        x = (torch.randn(shape) * 2 + 3).to(dt)
        w, b = (torch.rand(c) + 0.5).to(dt), torch.randn(c).to(dt)
        ref = F.group_norm(x.float(), groups, w.float(), b.float(), 1e-5).to(dt)
        _close(_run(lib, lib.forge_group_norm, x, groups, w, b, 1e-5, launches=launches, **kw), ref, dt)
        ref = F.group_norm(x.float(), groups, None, None, 1e-5).to(dt)
        _close(_run(lib, lib.forge_group_norm, x, groups, None, None, 1e-5, launches=launches, **kw), ref, dt)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.slow
def test_adaptive_avg_pool2d_kernels(lib, dtype):
    import torch
    import torch.nn.functional as F

    dt = getattr(torch, dtype)
    torch.manual_seed(4)
    x = torch.randn(3, 5, 7, 9).to(dt)
    for size in ((1, 1), 1, (3, 2), (7, 9), (4, 5), [2, 2]):
        kernel = ["global_avg_pool"] if size in ((1, 1), 1) else ["adaptive_avg_pool"]
        _close(
            _run(lib, lib.forge_adaptive_avg_pool2d, x, size, launches=kernel),
            F.adaptive_avg_pool2d(x.float(), size).to(dt),
            dt,
        )
    big = torch.randn(2, 3, 40, 40).to(dt)  # planes longer than one block: looped reduction
    _close(
        _run(lib, lib.forge_adaptive_avg_pool2d, big, (1, 1), launches=["global_avg_pool"]),
        F.adaptive_avg_pool2d(big.float(), 1).to(dt),
        dt,
    )
    three = torch.randn(4, 6, 6).to(dt)
    _close(
        _run(lib, lib.forge_adaptive_avg_pool2d, three, (2, 3), launches=["adaptive_avg_pool"]),
        F.adaptive_avg_pool2d(three.float(), (2, 3)).to(dt),
        dt,
    )


@pytest.mark.integration
@pytest.mark.parametrize("dtype", DTYPES)
def test_bias_activation_kernels(lib, dtype):
    import torch
    import torch.nn.functional as F

    dt = getattr(torch, dtype)
    torch.manual_seed(5)
    acts = {"relu": torch.relu, "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu}
    x = (torch.randn(2, 5, 3, 4) * 3).to(dt)
    for act, f in acts.items():
        for bias in (torch.randn(4).to(dt), torch.randn(5, 1, 1).to(dt), torch.randn(1, 5, 1, 1).to(dt)):
            _close(
                _run(lib, lib.forge_bias_act, x, bias, act, launches=["bias_act"]),
                f(x.float() + bias.float()).to(dt),
                dt,
            )
        inp = torch.randn(3, 2, 16).to(dt)
        w, b = (torch.randn(12, 16) / 4).to(dt), torch.randn(12).to(dt)
        ref = f(F.linear(inp.float(), w.float(), b.float())).to(dt)
        _close(_run(lib, lib.forge_linear_act, inp, w, b, act, launches=["bias_act"]), ref, dt)
        _close(_run(lib, lib.forge_linear_act, inp, w, None, act), f(F.linear(inp.float(), w.float())).to(dt), dt)
        strided = torch.randn(16, 6).to(dt).t()  # a non-contiguous x is fine: it only feeds the matmul
        _close(
            _run(lib, lib.forge_linear_act, strided, w, b, act),
            f(F.linear(strided.float(), w.float(), b.float())).to(dt),
            dt,
        )


def test_preconditions_fall_back_to_the_torch_op(lib):
    import torch
    import torch.nn.functional as F

    torch.manual_seed(6)
    x = torch.randn(6, 10)
    cases = [
        (lambda: lib.forge_softmax(x, 0), lambda: torch.softmax(x, 0), "softmax"),  # not the last dim
        (lambda: lib.forge_softmax(x.t(), -1), lambda: torch.softmax(x.t(), -1), "softmax"),  # not contiguous
        (lambda: lib.forge_softmax(x.double(), -1), lambda: torch.softmax(x.double(), -1), "softmax"),  # dtype
        (
            lambda: lib.forge_layer_norm(x.t(), (6,), None, None, 1e-5),
            lambda: F.layer_norm(x.t(), (6,)),
            "layer_norm",
        ),  # not contiguous
        (
            lambda: lib.forge_layer_norm(x.bfloat16(), (10,), torch.ones(10), None, 1e-5),
            lambda: F.layer_norm(x.bfloat16(), (10,), torch.ones(10)),
            "layer_norm",
        ),  # mixed dtypes
        (
            lambda: lib.forge_group_norm(x[:, :, None].transpose(0, 2), 1, None, None, 1e-5),
            lambda: F.group_norm(x[:, :, None].transpose(0, 2), 1),
            "group_norm",
        ),  # not contiguous
        (
            lambda: lib.forge_adaptive_avg_pool2d(x[None, None], (None, 3)),
            lambda: F.adaptive_avg_pool2d(x[None, None], (None, 3)),
            "adaptive_avg_pool2d",
        ),  # None in output size
        (
            lambda: lib.forge_bias_act(x[:, :1], torch.randn(10), "relu"),
            lambda: torch.relu(x[:, :1] + torch.randn(10)),
            "_forge_bias_act_torch",
        ),  # bias grows x
    ]
    for kernel, torch_op, op_name in cases:
        lib.fallbacks.clear()
        torch.manual_seed(7)
        got = kernel()
        torch.manual_seed(7)
        torch.testing.assert_close(got, torch_op())
        assert lib.fallbacks == [op_name]
    # autograd: with grad enabled and a parameter requiring grad, torch runs (a kernel has no backward)
    w = torch.ones(10, requires_grad=True)
    lib.fallbacks.clear()
    y = lib.forge_rms_norm(x, (10,), w, 1e-6)
    assert lib.fallbacks == ["rms_norm"] and y.grad_fn is not None
    with torch.no_grad():
        lib.fallbacks.clear()
        lib.forge_rms_norm(x, (10,), w, 1e-6)
        assert lib.fallbacks == []


def test_offline_candidate_model():
    c = OfflineCandidate(name="library:softmax", origin="library", summary="s", source="x = 1\n")
    assert c.ops == [] and c.model_dump()["name"] == "library:softmax"


# ----------------------------------------------------------------------------- real GPU compiler
#: representative launch configurations (as the wrappers pick them for large H200 shapes)
SM90_LAUNCHES = [
    ("softmax_rows", {"ROWS": 1, "BLOCK": 16384}, 16),
    ("softmax_rows", {"ROWS": 16, "BLOCK": 128}, 8),
    ("softmax_online", {"BLOCK": 4096}, 16),
    ("softmax_partial", {"SPLIT": 64, "BLOCK": 4096}, 16),
    ("softmax_split_apply", {"SPLIT": 64, "BLOCK": 4096}, 16),
    ("layer_norm_rows", {"HAS_W": True, "HAS_B": True, "ROWS": 1, "BLOCK": 8192}, 16),
    ("rms_norm_rows", {"HAS_W": True, "ROWS": 1, "BLOCK": 8192}, 16),
    ("seg_fused", {"RMS": False, "HAS_W": True, "HAS_B": True, "PER_CHANNEL": True, "BLOCK": 4096}, 8),
    ("seg_fused", {"RMS": True, "HAS_W": True, "HAS_B": False, "PER_CHANNEL": False, "BLOCK": 4096}, 8),
    ("seg_partial", {"SPLIT": 64, "BLOCK": 4096}, 8),
    (
        "seg_split_apply",
        {"RMS": False, "HAS_W": True, "HAS_B": True, "PER_CHANNEL": False, "SPLIT": 64, "BLOCK": 4096},
        8,
    ),
    ("global_avg_pool", {"ROWS": 32, "BLOCK": 64}, 8),
    ("adaptive_avg_pool", {"KH": 3, "ROWS": 256, "BLOCK_KW": 4}, 4),
    ("bias_act", {"BIAS": 1, "ACT": 2, "BR": 4, "BL": 1024}, 4),
    ("bias_act", {"BIAS": 2, "ACT": 3, "BR": 4, "BL": 1024}, 4),
    ("bias_act", {"BIAS": 0, "ACT": 4, "BR": 4, "BL": 1024}, 4),
]
_NO_V4_STORE = {"softmax_partial", "seg_partial", "global_avg_pool", "adaptive_avg_pool"}  # scalar results
_ALIGNED_INTS = {"n_cols", "seg_size", "chunk", "HW", "cpg"}


SM90_SCRIPT = """
import importlib.util, json, re, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
launches, aligned = json.loads(sys.argv[2]), set(json.loads(sys.argv[3]))
spec = importlib.util.spec_from_file_location("forge_offline_library_sm90", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
out = {"kernels": sorted(k.removeprefix("_forge_").removesuffix("_kernel") for k in vars(mod) if k.endswith("_kernel")),
       "results": []}
for dtype in ("fp32", "bf16"):
    for name, consts, warps in launches:
        fn = getattr(mod, f"_forge_{name}_kernel")
        sig, attrs = {}, {}
        for i, p in enumerate(fn.params):
            if p.is_constexpr:
                sig[p.name] = "constexpr"
                continue
            if p.name.endswith("_ptr"):
                sig[p.name] = "*fp32" if p.name == "part_ptr" else f"*{dtype}"
            else:
                sig[p.name] = "fp32" if p.name == "eps" else "i32"
            if p.name.endswith("_ptr") or p.name in aligned:
                attrs[(i,)] = [["tt.divisibility", 16]]
        k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                           target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
        ptx = k.asm["ptx"]
        out["results"].append([name, dtype, len(k.asm["cubin"]), bool(re.search(r"ld\\.global[\\w.:]*\\.v4", ptx)),
                               bool(re.search(r"st\\.global[\\w.:]*\\.v4", ptx))])
print(json.dumps(out))
"""


@pytest.mark.slow
def test_kernels_compile_for_sm90_with_vectorized_access(tmp_path):
    """The interpreter is lenient: compile every kernel with the real backend for sm_90a (no GPU
    needed; in a fresh process, as the interpreter patches triton.language), at H200-sized
    blocks, and check that global loads and stores are 128-bit vectorized."""
    pytest.importorskip("triton")
    files = [
        "common.py",
        "softmax.py",
        "seg_norm.py",
        "layer_norm.py",
        "rms_norm.py",
        "group_norm.py",
        "adaptive_avg_pool2d.py",
        "bias_act.py",
    ]
    path = tmp_path / "forge_offline_library_sm90.py"
    path.write_text("\n\n".join(library_text(f) for f in files))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(TRITON_CACHE_DIR=str(tmp_path / "triton"), TRITON_DEFAULT_FP_FUSION="1")
    out = subprocess.run(
        [sys.executable, "-c", SM90_SCRIPT, str(path), json.dumps(SM90_LAUNCHES), json.dumps(sorted(_ALIGNED_INTS))],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    if out.returncode != 0 and ("GPUTarget" in out.stderr or "ASTSource" in out.stderr) and "ImportError" in out.stderr:
        pytest.skip("this Triton has no compile-only API")
    assert out.returncode == 0, out.stderr[-4000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["kernels"] == sorted({name for name, _, _ in SM90_LAUNCHES})  # every kernel is covered
    assert len(got["results"]) == 2 * len(SM90_LAUNCHES)
    for name, dtype, cubin, v4_load, v4_store in got["results"]:
        assert cubin > 0, name
        if name != "adaptive_avg_pool":  # its window loads are not aligned
            assert v4_load, f"{name} {dtype}: no 128-bit global loads"
        if name not in _NO_V4_STORE:
            assert v4_store, f"{name} {dtype}: no 128-bit global stores"
