"""The rewrite that turns an accepted candidate into an edit of the user's file.

Rewritten files are imported in fresh interpreters (never in the test process): Triton runs
under its interpreter (TRITON_INTERPRET=1), C++ extensions build into a directory shared by
the session's tests.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import candidates as C
import pytest
from conftest import FIXTURES

from forge_lsp.engine import load_task
from forge_lsp.reintegrate import (
    Rewrite,
    RewriteError,
    VerifiedDomain,
    revert_module,
    rewrite_module,
    source_fingerprint,
)

RW = FIXTURES / "rewrite"
CPU_FP32_2D = VerifiedDomain.for_device("cpu", "float32", [2])
LINEAR = (FIXTURES / "linear_task.py").read_text()
LINEAR_TRITON = (RW / "linear_relu_triton.py").read_text()
SOFTMAX = (FIXTURES / "softmax_small.py").read_text()
BLOCK_USER = (RW / "user_block.py").read_text()
# an offline-style candidate: the user's file verbatim, then ModelNew(Block) and its kernels
BLOCK_CAND = BLOCK_USER + "\n\n" + (RW / "block_triton_tail.py").read_text()

PRELUDE = """
import copy, importlib.util, inspect, json, pickle, sys
import torch


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


new = load(sys.argv[1], "rewritten")
old = load(sys.argv[2], "original")
report = {}
"""


@pytest.fixture(scope="session")
def ext_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("torch-extensions")


def run_rewritten(tmp_path: Path, rw: Rewrite, original: str, body: str, ext_dir: Path, **env) -> dict:
    """Import the rewritten file and the original in a fresh interpreter; run `body`; return `report`."""
    new, old = tmp_path / "rewritten.py", tmp_path / "original.py"
    new.write_text(rw.new_text)
    old.write_text(original)
    script = tmp_path / "check.py"
    script.write_text(PRELUDE + textwrap.dedent(body) + "\nprint('REPORT ' + json.dumps(report))\n")
    full_env = {k: v for k, v in os.environ.items() if k != "FORGE_DISABLE"}
    full_env.update(
        TRITON_INTERPRET="1",
        TRITON_CACHE_DIR=str(tmp_path / "triton"),
        TORCH_EXTENSIONS_DIR=str(ext_dir),
        OMP_NUM_THREADS="1",
    )
    full_env.update(env)
    p = subprocess.run(
        [sys.executable, str(script), str(new), str(old)],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=tmp_path,
        timeout=300,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-5000:]
    line = next(x for x in p.stdout.splitlines() if x.startswith("REPORT "))
    return json.loads(line[len("REPORT ") :])


def fp32_tol(task_file: Path) -> tuple[float, float]:
    tol = load_task(task_file).tolerance_for("float32")
    return tol.atol, tol.rtol


# ----------------------------------------------------------------------------- the rewritten module
@pytest.mark.slow
def test_linear_rewrite_keeps_interface_state_dict_and_runs_the_kernels(tmp_path, ext_dir):
    rw = rewrite_module(LINEAR, "Model", LINEAR_TRITON, CPU_FP32_2D, run_id="r1", candidate_id="c3", speedup=1.42)
    atol, rtol = fp32_tol(FIXTURES / "linear_task.py")
    r = run_rewritten(
        tmp_path,
        rw,
        LINEAR,
        f"""
        report["init_signature_same"] = inspect.signature(new.Model.__init__) == inspect.signature(old.Model.__init__)
        report["class_signature"] = str(inspect.signature(new.Model))
        torch.manual_seed(0)
        ref = old.Model(*old.get_init_inputs())
        opt = new.Model(*new.get_init_inputs())
        report["keys"] = [list(opt.state_dict()), list(ref.state_dict())]
        opt.load_state_dict(ref.state_dict(), strict=True)
        ref.load_state_dict(opt.state_dict(), strict=True)   # and checkpoints go back
        x = torch.randn(8, 32)
        with torch.no_grad():
            report["match"] = torch.allclose(opt(x), ref(x), atol={atol}, rtol={rtol})
        report["calls"] = dict(new.Model._forge_calls)
        report["launches"] = new.LAUNCHES[0]
        report["is_subclass"] = issubclass(new.Model, new._ModelReference)
        opt.eval(); ref.eval()                 # no dropout/batch norm: the mode does not matter
        with torch.no_grad():
            report["eval"] = [torch.allclose(opt(x), ref(x), atol={atol}, rtol={rtol}), dict(new.Model._forge_calls)]
    """,
        ext_dir,
    )
    assert r["init_signature_same"] and r["class_signature"] == "(d_in, d_out)"
    assert r["keys"][0] == r["keys"][1] == ["proj.weight", "proj.bias"]
    assert r["match"]
    assert r["calls"] == {"optimized": 1, "reference": 0} and r["launches"] == 1
    assert r["is_subclass"]
    assert "_forge_mode_sensitive = False" in rw.new_text
    assert r["eval"] == [True, {"optimized": 2, "reference": 0}]


@pytest.mark.integration
def test_weights_changed_after_the_first_call_are_used_by_the_kernels(tmp_path, ext_dir):
    rw = rewrite_module(LINEAR, "Model", LINEAR_TRITON, CPU_FP32_2D)
    r = run_rewritten(
        tmp_path,
        rw,
        LINEAR,
        """
        torch.manual_seed(0)
        ref, opt = old.Model(32, 16), new.Model(32, 16)
        opt.load_state_dict(ref.state_dict())
        x = torch.randn(8, 32)
        res = []
        with torch.no_grad():
            opt(x)                                                  # builds and shares
            ref.proj.weight.mul_(2.0)
            opt.load_state_dict(ref.state_dict())                   # in-place copy into shared tensors
            res.append(torch.allclose(opt(x), ref(x), atol=1e-5))
            w = torch.nn.Parameter(torch.randn(16, 32))
            ref.proj.weight, opt.proj.weight = w, torch.nn.Parameter(w.detach().clone())  # replaced object
            res.append(torch.allclose(opt(x), ref(x), atol=1e-5))
            opt.load_state_dict({k: v * 3 for k, v in ref.state_dict().items()}, assign=True)
            ref.load_state_dict({k: v * 3 for k, v in ref.state_dict().items()})
            res.append(torch.allclose(opt(x), ref(x), atol=1e-5))
            opt.double(); opt.float()                               # buffers/params converted and back
            res.append(torch.allclose(opt(x), ref(x), atol=1e-5))
        report["results"] = res
        report["calls"] = dict(new.Model._forge_calls)
        report["launches"] = new.LAUNCHES[0]
    """,
        ext_dir,
    )
    assert r["results"] == [True, True, True, True]
    assert r["calls"] == {"optimized": 5, "reference": 0} and r["launches"] == 5


@pytest.mark.slow
def test_pickle_and_deepcopy_hold_the_module_not_the_kernels_instance(tmp_path, ext_dir):
    rw = rewrite_module(LINEAR, "Model", LINEAR_TRITON, CPU_FP32_2D)
    r = run_rewritten(
        tmp_path,
        rw,
        LINEAR,
        """
        torch.manual_seed(0)
        opt = new.Model(32, 16)
        x = torch.randn(8, 32)
        with torch.no_grad():
            y = opt(x)
            report["runtime_built"] = "_forge_runtime" in opt.__dict__
            c = copy.deepcopy(opt)
            p = pickle.loads(pickle.dumps(opt))
            report["copies_without_runtime"] = "_forge_runtime" not in c.__dict__ and "_forge_runtime" not in p.__dict__
            report["match"] = torch.equal(c(x), y) and torch.equal(p(x), y)
            report["copy_has_own_weights"] = c.proj.weight.data_ptr() != opt.proj.weight.data_ptr()
        report["calls"] = dict(new.Model._forge_calls)
    """,
        ext_dir,
    )
    assert r["runtime_built"] and r["copies_without_runtime"] and r["match"] and r["copy_has_own_weights"]
    assert r["calls"] == {"optimized": 3, "reference": 0}


@pytest.mark.integration
def test_inputs_outside_the_verified_domain_take_the_original_path(tmp_path, ext_dir):
    rw = rewrite_module(LINEAR, "Model", LINEAR_TRITON, CPU_FP32_2D)
    r = run_rewritten(
        tmp_path,
        rw,
        LINEAR,
        """
        torch.manual_seed(0)
        ref, opt = old.Model(32, 16), new.Model(32, 16)
        opt.load_state_dict(ref.state_dict())
        cases = {
            "rank3": torch.randn(2, 8, 32),
            "non_contiguous": torch.randn(32, 8).t(),
            "empty": torch.randn(0, 32),
        }
        report["paths"] = {}
        for name, x in cases.items():
            before = dict(new.Model._forge_calls)
            with torch.no_grad():
                same = torch.equal(opt(x), ref(x))
            after = new.Model._forge_calls
            report["paths"][name] = ["reference" if after["reference"] > before["reference"] else "optimized", same]
        x = torch.randn(8, 32)
        y = opt(x)                                   # autograd on: parameters require grad
        report["grad"] = [new.Model._forge_calls["reference"], y.requires_grad, torch.equal(y, ref(x))]
        y.sum().backward()
        report["grad_flows"] = opt.proj.weight.grad is not None
        with torch.no_grad():  # a weight no longer dense (a memory-format conversion): verified on dense ones only
            dense = opt.proj.weight.data
            opt.proj.weight.data = dense.t().contiguous().t()
            before = new.Model._forge_calls["reference"]
            same = torch.equal(opt(x), ref(x))
            report["strided_weight"] = [new.Model._forge_calls["reference"] - before, same]
            opt.proj.weight.data = dense
        opt.double(); ref.double()
        with torch.no_grad():
            report["float64"] = [torch.equal(opt(x.double()), ref(x.double())), dict(new.Model._forge_calls)]
        report["kwargs"] = torch.equal(opt(x=x.double()), ref(x.double()))
        report["launches"] = new.LAUNCHES[0]
    """,
        ext_dir,
    )
    assert r["paths"] == {
        "rank3": ["reference", True],
        "non_contiguous": ["reference", True],
        "empty": ["reference", True],
    }
    assert r["grad"] == [4, True, True] and r["grad_flows"]
    assert r["strided_weight"] == [1, True]
    assert r["float64"] == [True, {"optimized": 0, "reference": 6}]
    assert r["kwargs"] and r["launches"] == 0


@pytest.mark.integration
def test_softmax_triton_candidate_other_dtype_or_rank_falls_back(tmp_path, ext_dir):
    rw = rewrite_module(SOFTMAX, "Model", C.TRITON_CORRECT, CPU_FP32_2D, candidate_id="triton")
    atol, rtol = fp32_tol(FIXTURES / "softmax_small.py")
    r = run_rewritten(
        tmp_path,
        rw,
        SOFTMAX,
        f"""
        ref, opt = old.Model(), new.Model()
        out = {{}}
        for name, x in {{"fp32_16x100": torch.randn(16, 100) * 3, "fp32_7x100": torch.randn(7, 100),
                         "fp64": torch.randn(16, 100, dtype=torch.float64), "rank3": torch.randn(2, 16, 100)}}.items():
            before = new.Model._forge_calls["optimized"]
            y = opt(x)
            out[name] = [new.Model._forge_calls["optimized"] > before, y.dtype == x.dtype,
                         torch.allclose(y, ref(x), atol={atol}, rtol={rtol})]
        report["out"] = out
    """,
        ext_dir,
    )
    assert r["out"] == {
        "fp32_16x100": [True, True, True],
        "fp32_7x100": [True, True, True],
        "fp64": [False, True, True],
        "rank3": [False, True, True],
    }


@pytest.mark.slow
def test_forge_disable_forces_the_original_path(tmp_path, ext_dir):
    rw = rewrite_module(LINEAR, "Model", LINEAR_TRITON, CPU_FP32_2D)
    r = run_rewritten(
        tmp_path,
        rw,
        LINEAR,
        """
        torch.manual_seed(0)
        ref, opt = old.Model(32, 16), new.Model(32, 16)
        opt.load_state_dict(ref.state_dict())
        x = torch.randn(8, 32)
        with torch.no_grad():
            report["match"] = torch.equal(opt(x), ref(x))
        report["calls"] = dict(new.Model._forge_calls)
        report["launches"] = new.LAUNCHES[0]
    """,
        ext_dir,
        FORGE_DISABLE="1",
    )
    assert r["match"] and r["calls"] == {"optimized": 0, "reference": 1} and r["launches"] == 0


@pytest.mark.slow
def test_user_names_survive_clashing_candidate_names_and_old_style_super(tmp_path, ext_dir):
    rw = rewrite_module(BLOCK_USER, "Block", BLOCK_CAND, CPU_FP32_2D)
    assert rw.renamed == {"BLOCK": "_forge_BLOCK", "bias_relu_": "_forge_bias_relu_"}
    assert "class Block (a copy of your class)" in rw.dropped and "def tripled_bias_relu" in rw.dropped
    assert "super(_BlockReference, self).__init__()" in rw.new_text
    assert "class _BlockForge(_BlockReference):" in rw.new_text
    assert "_forge_mode_sensitive = True" in rw.new_text  # Block names nn.Dropout
    assert (
        "    def __init__(self, d_in: int, d_out: int, scale: float = 0.5, *, p: float = 0.0):\n"
        "        super().__init__(d_in, d_out, scale, p=p)\n" in rw.new_text
    )
    assert rw.new_text.startswith('"""A user\'s model file') and rw.new_text.count("from __future__") == 1
    r = run_rewritten(
        tmp_path,
        rw,
        BLOCK_USER,
        """
        report["sig"] = inspect.signature(new.Block.__init__) == inspect.signature(old.Block.__init__)
        torch.manual_seed(0)
        ref, opt = old.Block(32, 16, 0.25), new.Block(32, 16, 0.25)
        report["keys"] = list(opt.state_dict()) == list(ref.state_dict()) == ["shift", "proj.weight", "proj.bias"]
        opt.load_state_dict(ref.state_dict(), strict=True)
        x, b = torch.randn(8, 32), torch.randn(32)
        with torch.no_grad():
            report["match"] = torch.allclose(opt(x), ref(x), atol=1e-5)
            ref.shift.fill_(1.5); opt.shift.fill_(1.5)        # a shared buffer changed in place
            report["buffer_seen"] = torch.allclose(opt(x), ref(x), atol=1e-5)
        report["calls"] = dict(new.Block._forge_calls)
        report["launches"] = new.LAUNCHES[0]
        report["user_names"] = [new.BLOCK, torch.equal(new.tripled_bias_relu(x, b), old.tripled_bias_relu(x, b)),
                                new.LAUNCHES[0]]
        ref.eval(); opt.eval()                                # dropout layer: mode was verified in training
        with torch.no_grad():
            report["eval"] = [torch.allclose(opt(x), ref(x), atol=1e-5), dict(new.Block._forge_calls)]
    """,
        ext_dir,
    )
    assert r["sig"] and r["keys"] and r["match"] and r["buffer_seen"]
    assert r["calls"] == {"optimized": 2, "reference": 0} and r["launches"] == 2
    assert r["user_names"] == [3, True, 2]  # the user's BLOCK and helper, not the candidate's
    assert r["eval"] == [True, {"optimized": 2, "reference": 1}]


@pytest.mark.slow
def test_class_without_init_keeps_its_signature(tmp_path, ext_dir):
    user = textwrap.dedent("""
        import torch
        import torch.nn as nn


        class Act(nn.Module):
            def forward(self, x):
                return torch.softmax(x, dim=1)
    """).lstrip()
    rw = rewrite_module(user, "Act", C.TORCH_CORRECT, CPU_FP32_2D)
    r = run_rewritten(
        tmp_path,
        rw,
        user,
        """
        report["sig"] = inspect.signature(new.Act) == inspect.signature(old.Act)
        x = torch.randn(4, 5)
        report["match"] = torch.equal(new.Act()(x), old.Act()(x))
        report["calls"] = dict(new.Act._forge_calls)
    """,
        ext_dir,
    )
    assert r["sig"] and r["match"] and r["calls"] == {"optimized": 1, "reference": 0}


@pytest.mark.slow
def test_private_attribute_names_keep_their_state_dict_keys(tmp_path, ext_dir):
    user = textwrap.dedent("""
        import torch
        import torch.nn as nn


        class Scale(nn.Module):
            def __init__(self):
                super().__init__()
                self.__w = nn.Parameter(torch.ones(3))

            def forward(self, x):
                return x * self.__w
    """).lstrip()
    cand = textwrap.dedent("""
        import torch
        import torch.nn as nn


        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_parameter("_Scale__w", nn.Parameter(torch.ones(3)))

            def forward(self, x):
                return torch.mul(x, getattr(self, "_Scale__w"))
    """).lstrip()
    rw = rewrite_module(user, "Scale", cand, CPU_FP32_2D)
    assert rw.reference_class == "_Scale"  # mangles private names exactly as Scale did
    r = run_rewritten(
        tmp_path,
        rw,
        user,
        """
        report["keys"] = [list(new.Scale().state_dict()), list(old.Scale().state_dict())]
        with torch.no_grad():
            report["match"] = torch.equal(new.Scale()(torch.ones(2, 3)), old.Scale()(torch.ones(2, 3)))
        report["calls"] = dict(new.Scale._forge_calls)
    """,
        ext_dir,
    )
    assert r["keys"] == [["_Scale__w"], ["_Scale__w"]] and r["match"]
    assert r["calls"] == {"optimized": 1, "reference": 0}


@pytest.mark.slow
def test_cpp_load_inline_candidate_is_built_by_the_rewritten_module(tmp_path, ext_dir):
    rw = rewrite_module(SOFTMAX, "Model", C.CPP_CORRECT, CPU_FP32_2D)
    assert "ext = load_inline(" in rw.new_text and rw.new_text.index("ext = load_inline(") > rw.new_text.index(
        "class _ModelReference"
    )
    r = run_rewritten(
        tmp_path,
        rw,
        SOFTMAX,
        """
        ref, opt = old.Model(), new.Model()
        x = torch.randn(16, 100) * 3
        report["match"] = torch.allclose(opt(x), ref(x), atol=1e-4, rtol=1e-4)
        report["fp64"] = torch.equal(opt(x.double()), ref(x.double()))
        report["calls"] = dict(new.Model._forge_calls)
        report["ext"] = type(new.ext).__name__
    """,
        ext_dir,
    )
    assert r["match"] and r["fp64"] and r["calls"] == {"optimized": 1, "reference": 1} and r["ext"] == "module"


# ----------------------------------------------------------------------------- refusals
def test_missing_duplicate_and_rewritten_classes_are_refused_without_touching_the_file(tmp_path):
    f = tmp_path / "model.py"
    f.write_text(LINEAR)
    text = f.read_text()
    with pytest.raises(RewriteError, match=r"no top-level class 'Block' in the file \(classes found: Model\)"):
        rewrite_module(text, "Block", LINEAR_TRITON, CPU_FP32_2D)
    twice = LINEAR + "\n\nclass Model(nn.Module):\n    pass\n"
    with pytest.raises(RewriteError, match=r"class 'Model' is defined 2 times at top level \(lines 7, 24\)"):
        rewrite_module(twice, "Model", LINEAR_TRITON, CPU_FP32_2D)
    done = rewrite_module(text, "Model", LINEAR_TRITON, CPU_FP32_2D).new_text
    with pytest.raises(RewriteError, match=r"Model is already optimized by forge; reject/revert that rewrite first"):
        rewrite_module(done, "Model", LINEAR_TRITON, CPU_FP32_2D)
    with pytest.raises(RewriteError, match=r"the candidate defines no top-level class 'ModelNew'"):
        rewrite_module(text, "Model", LINEAR_TRITON.replace("ModelNew", "Other"), CPU_FP32_2D)
    with pytest.raises(RewriteError, match=r"the candidate does not parse: line 1"):
        rewrite_module(text, "Model", "def (:\n", CPU_FP32_2D)
    with pytest.raises(RewriteError, match=r"the file does not parse: line 1"):
        rewrite_module("class Model(:\n", "Model", LINEAR_TRITON, CPU_FP32_2D)
    assert text == LINEAR and f.read_text() == LINEAR


def test_domain_validation():
    d = VerifiedDomain.for_device("cuda:0", ["torch.float16", "half", "bfloat16"], [2, 1])
    assert d.device_types == ["cuda"] and d.dtypes == ["float16", "bfloat16"] and d.ranks == [2, 1]
    with pytest.raises(ValueError, match="unknown dtype 'floaty'"):
        VerifiedDomain.for_device("cpu", "floaty", [2])
    with pytest.raises(ValueError, match="ranks"):
        VerifiedDomain.for_device("cpu", "float32", [-1])


# ----------------------------------------------------------------------------- text properties
def test_fingerprint_follows_the_class_and_what_it_reads_only():
    base = source_fingerprint(BLOCK_USER, "Block")
    assert base == source_fingerprint(BLOCK_USER, "Block")
    body_changed = BLOCK_USER.replace("* self.scale + self.shift", "* self.scale - self.shift")
    assert source_fingerprint(body_changed, "Block") != base
    comment_in_class = BLOCK_USER.replace("    def forward(self, x):", "    # note\n    def forward(self, x):")
    assert source_fingerprint(comment_in_class, "Block") != base
    unrelated = (
        BLOCK_USER.replace("return bias_relu_(y.clone(), b)", "return bias_relu_(y, b)").replace(
            "BLOCK = 3", "BLOCK = 4"
        )
        + "\n\ndef extra():\n    return 1\n"
    )
    assert source_fingerprint(unrelated, "Block") == base
    import_changed = BLOCK_USER.replace("from torch import nn", "import torch.nn as nn")
    assert source_fingerprint(import_changed, "Block") != base  # Block reads nn
    assert source_fingerprint(BLOCK_USER.replace("\n", "\r\n"), "Block") == base
    task_changed = LINEAR.replace("return [torch.randn(batch, d_in)]", "return [torch.randn(batch, d_in) * 2]")
    assert source_fingerprint(task_changed, "Model") == source_fingerprint(LINEAR, "Model")
    with pytest.raises(RewriteError, match="no top-level class"):
        source_fingerprint(BLOCK_USER, "Nope")


def _apply_lines(text: str, rw: Rewrite) -> str:
    lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", text)
    return "".join(lines[: rw.start_line]) + rw.replacement + "".join(lines[rw.end_line :])


DECORATED_AT_EOF = (
    "import torch\nimport torch.nn as nn\n\n\ndef register(cls):\n    return cls\n\n\n@register\n"
    "class Model(nn.Module):\n    def forward(self, x):\n        return torch.softmax(x, dim=1)"
)


@pytest.mark.parametrize(
    "text,name,cand",
    [
        (LINEAR, "Model", LINEAR_TRITON),
        (SOFTMAX, "Model", C.CPP_CORRECT),
        (BLOCK_USER, "Block", BLOCK_CAND),
        (LINEAR.replace("\n", "\r\n"), "Model", LINEAR_TRITON),
        (DECORATED_AT_EOF, "Model", C.TORCH_CORRECT),
    ],
    ids=["linear", "softmax-cpp", "block", "crlf", "decorated-at-eof"],
)
def test_replacement_of_the_line_range_gives_new_text_and_revert_restores_it(text, name, cand):
    rw = rewrite_module(text, name, cand, CPU_FP32_2D, run_id="r7", candidate_id="c2", speedup=2.0)
    assert _apply_lines(text, rw) == rw.new_text
    lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", text)
    assert rw.start_line == min(i for i, line in enumerate(lines) if line.startswith(("class " + name, "@")))
    assert rw.new_text.startswith("".join(lines[: rw.start_line]))
    assert rw.new_text.endswith("".join(lines[rw.end_line :]))
    assert "# --- forge: begin optimized " + name + " (run r7, candidate c2, 2.00×) ---" in rw.new_text
    compile(rw.new_text, "rewritten.py", "exec")
    if "\r\n" in text:
        assert "\n" not in rw.new_text.replace("\r\n", "")
    back = revert_module(rw.new_text, name)
    assert back.new_text == text
    assert _apply_lines(rw.new_text, back) == back.new_text


TWO_CLASSES = """import torch
import torch.nn as nn


class A(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


class B(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1) * 2
"""


@pytest.mark.slow
def test_two_rewritten_classes_in_one_file_can_be_reverted_independently(tmp_path, ext_dir):
    cand_b = C.TRITON_CORRECT.replace("return softmax(x)", "return softmax(x) * 2")
    both = rewrite_module(
        rewrite_module(TWO_CLASSES, "A", C.TRITON_CORRECT, CPU_FP32_2D).new_text, "B", cand_b, CPU_FP32_2D
    )
    block_b = both.new_text[both.new_text.index("# --- forge: begin optimized B") :]
    assert "def softmax_kernel" in block_b and "import triton\n" in block_b  # not borrowed from A's block
    only_b = revert_module(both.new_text, "A")
    r = run_rewritten(
        tmp_path,
        only_b,
        TWO_CLASSES,
        """
        x = torch.randn(4, 10)
        report["match"] = [torch.equal(new.A()(x), old.A()(x)), torch.allclose(new.B()(x), old.B()(x), atol=1e-5)]
        report["calls"] = dict(new.B._forge_calls)
        report["a_is_original"] = not hasattr(new.A, "_forge_calls")
    """,
        ext_dir,
    )
    assert r["match"] == [True, True] and r["calls"] == {"optimized": 1, "reference": 0} and r["a_is_original"]
    assert revert_module(only_b.new_text, "B").new_text == TWO_CLASSES


def test_revert_refuses_when_other_code_uses_the_block():
    done = rewrite_module(SOFTMAX, "Model", C.TRITON_CORRECT, CPU_FP32_2D).new_text
    with pytest.raises(RewriteError, match="other code in the file uses softmax from forge's block for Model"):
        revert_module(done + "\n\ndef use(x):\n    return softmax(x)\n", "Model")
    with pytest.raises(RewriteError, match="Model is not a forge rewrite"):
        revert_module(SOFTMAX, "Model")


@pytest.mark.slow
def test_forges_offline_library_candidate_applies(tmp_path, ext_dir, monkeypatch):
    """What `forge optimize --apply` writes without a model: ModelNew derives from the task's
    class and traces its forward with torch.fx; the rewrite maps it onto the original class."""
    from forge_lsp.agent.offline import offline_candidates

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    task = load_task(FIXTURES / "softmax_small.py")
    cand = next(c for c in offline_candidates(task, device="cpu", library=True) if c.name == "library:softmax")
    rw = rewrite_module(SOFTMAX, "Model", cand.source, CPU_FP32_2D, candidate_id=cand.name)
    assert "class Model (a copy of your class)" in rw.dropped
    assert "class _ModelForge(_ModelReference):" in rw.new_text
    r = run_rewritten(
        tmp_path,
        rw,
        SOFTMAX,
        """
        x = torch.randn(16, 100) * 3
        with torch.no_grad():
            report["match"] = torch.allclose(new.Model()(x), old.Model()(x), atol=1e-4, rtol=1e-4)
        report["calls"] = dict(new.Model._forge_calls)
    """,
        ext_dir,
    )
    assert r["match"] and r["calls"] == {"optimized": 1, "reference": 0}
