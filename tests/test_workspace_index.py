"""The language server's workspace index (forge_lsp.workspace): modules, inputs, kernels, skeletons."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from conftest import FIXTURES

from forge_lsp.workspace import (
    WorkspaceIndex,
    apply_insertions,
    index_cuda,
    index_file,
    index_python,
    inputs_skeleton,
    parse_pyproject_forge,
    skeleton_edits,
)

PROJECT = FIXTURES / "workspace" / "project"
SKELETONS = FIXTURES / "workspace" / "skeleton"


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(PROJECT, root)
    return root


# --------------------------------------------------------------------------------------------------
# Module detection


ALIASES = src("""
    import torch
    import torch as th
    from torch import nn as tnn
    from torch.nn import Module as M, Linear
    import torch.nn

    class ViaTorch(torch.nn.Module):
        def forward(self, x):
            return x

    class ViaTh(th.nn.Module):
        pass

    class ViaTnn(tnn.Module):
        pass

    class ViaM(M):
        pass

    class ViaLinear(Linear):
        pass

    @some_decorator
    class Decorated(torch.nn.Sequential):
        pass

    class NotAModule(object):
        def forward(self, x):
            return x

    class Param(torch.nn.Parameter):
        pass
""")


def test_modules_found_with_spans_and_bases_as_written_for_every_import_style():
    idx = index_python("/ws/a.py", ALIASES)
    by = {m.name: m for m in idx.modules}
    assert list(by) == ["ViaTorch", "ViaTh", "ViaTnn", "ViaM", "ViaLinear", "Decorated"]
    assert by["ViaTorch"].bases == ["torch.nn.Module"] and by["ViaTh"].bases == ["th.nn.Module"]
    assert by["ViaTnn"].bases == ["tnn.Module"] and by["ViaM"].bases == ["M"]
    lines = ALIASES.splitlines()
    for m in idx.modules:
        assert lines[m.line].startswith("class ") and m.column == 0
        assert lines[m.line][m.name_column :].startswith(m.name)
        assert lines[m.end_line].strip() in ("pass", "return x")  # end_line is inclusive
    assert (by["ViaTorch"].line, by["ViaTorch"].end_line) == (6, 8)
    assert (
        by["Decorated"].start_line == by["Decorated"].line - 1
        and lines[by["Decorated"].start_line] == "@some_decorator"
    )
    assert by["ViaTorch"].has_forward and not by["ViaTh"].has_forward
    assert by["ViaLinear"].has_forward and by["Decorated"].has_forward  # inherited from torch.nn layers


def test_same_file_subclasses_are_modules_transitively_and_plain_classes_are_not():
    text = src("""
        from torch import nn

        class Leaf(Base2):       # defined before its bases: order does not matter
            pass

        class Base(nn.Module):
            def __init__(self, dim, *, eps=1e-5):
                super().__init__()

            def forward(self, x):
                return x

        class Base2(Base):
            pass

        class Mixin:
            pass

        class Both(Mixin, Base2):
            pass

        class Plain(Mixin):
            pass

        class Module:  # a local class named Module is not torch's
            pass

        class Fake(Module):
            pass

        def factory():
            class Inner(nn.Module):  # not module-level
                pass
            return Inner

        if True:
            class Conditional(nn.Module):
                pass
    """)
    by = {m.name: m for m in index_python("/ws/b.py", text).modules}
    assert set(by) == {"Leaf", "Base", "Base2", "Both", "Conditional"}
    assert by["Leaf"].bases == ["Base2"] and by["Both"].bases == ["Mixin", "Base2"]
    assert by["Leaf"].has_forward and by["Leaf"].init_params == ["dim", "eps"]  # followed through Base2 -> Base
    assert by["Conditional"].init_params == []


def test_bare_nn_without_an_import_still_counts_and_unrelated_module_names_do_not():
    text = "class Editing(nn.Module):\n    pass\n\nclass Other(Module):\n    pass\n\nclass Keras(layers.Layer):\n    pass\n"
    assert [m.name for m in index_python("/ws/c.py", text).modules] == ["Editing"]


def test_init_and_forward_parameters():
    text = src("""
        import torch.nn as nn
        class Model(nn.Module):
            def __init__(self, a, b: int = 3, /, c=None, *rest, d, e=2, **extra):
                super().__init__()
            def forward(self, x, mask=None):
                return x
    """)
    (m,) = index_python("/ws/d.py", text).modules
    assert m.init_params == ["a", "b", "c", "*rest", "d", "e", "**extra"]
    assert m.forward_params == ["x", "mask"]


def test_crlf_and_bom_positions_follow_the_given_text():
    text = "\ufeffimport torch.nn as nn\r\n\r\nclass A(nn.Module):\r\n    pass\r\nclass B(nn.Module): pass\r"
    by = {m.name: m for m in index_python("/ws/e.py", text).modules}
    assert (by["A"].line, by["A"].end_line, by["A"].name_column) == (2, 3, 6)
    assert (by["B"].line, by["B"].end_line) == (4, 4)
    bom_first = "\ufeffclass A(nn.Module):\n    pass\n"
    (a,) = index_python("/ws/f.py", bom_first).modules
    assert (a.column, a.name_column) == (1, 7)  # the BOM is character 0 of the text as given
    assert bom_first.splitlines()[0][a.name_column :].startswith("A")


def test_indexing_never_executes_the_file(tmp_path):
    marker = tmp_path / "executed"
    text = f"open({str(marker)!r}, 'w').write('x')\nraise SystemExit(3)\nimport torch.nn as nn\nclass M(nn.Module):\n    pass\n"
    py = tmp_path / "side_effects.py"
    py.write_text(text)
    assert [m.name for m in index_python(str(py), text).modules] == ["M"]
    w = WorkspaceIndex(tmp_path)
    w.scan()
    assert [m.name for _, m in w.modules()] == ["M"]
    assert not marker.exists()


# --------------------------------------------------------------------------------------------------
# Example inputs


KERNELBENCH = src("""
    import torch
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, a, b, c):
            super().__init__()

        def forward(self, x):
            return x

    class Model(nn.Module):
        def __init__(self, dim):
            super().__init__()

        def forward(self, x):
            return x

    class ModelNew(nn.Module):
        def __init__(self, dim):
            super().__init__()

        def forward(self, x):
            return x

    def get_inputs():
        return [torch.randn(4, 8)]

    def get_init_inputs():
        return [8]
""")


def test_kernelbench_inputs_go_to_model_and_to_classes_whose_signatures_fit():
    idx = index_python("/ws/task.py", KERNELBENCH)
    assert idx.has_get_inputs and idx.has_get_init_inputs
    by = {m.name: m for m in idx.modules}
    assert by["Block"].inputs is None  # its constructor takes 3 arguments, get_init_inputs gives 1
    for name in ("Model", "ModelNew"):
        inp = by[name].inputs
        assert inp is not None and inp.kind == "kernelbench"
        assert inp.task_file == "/ws/task.py" and inp.model_class == name
        assert "get_inputs()" in inp.detail


def test_kernelbench_single_module_with_any_name_and_missing_half():
    single = src("""
        import torch.nn as nn
        class Softmax(nn.Module):
            def forward(self, x):
                return x.softmax(-1)
        def get_inputs():
            return make_inputs()
        def get_init_inputs():
            return []
    """)
    (m,) = index_python("/ws/s.py", single).modules
    assert m.inputs is not None and m.inputs.kind == "kernelbench" and m.inputs.model_class == "Softmax"
    half = single.replace("def get_init_inputs():\n    return []\n", "")
    idx = index_python("/ws/s.py", half)
    assert idx.has_get_inputs and not idx.has_get_init_inputs and idx.modules[0].inputs is None


def test_kernelbench_inputs_load_as_an_engine_task(tmp_path):
    from forge_lsp.engine import load_task

    path = tmp_path / "task.py"
    path.write_text(KERNELBENCH)
    for m in index_python(str(path), KERNELBENCH).modules:
        if m.inputs is not None:
            task = load_task(m.inputs.task_file, model_class=m.inputs.model_class)
            assert task.model_class == m.name


def test_pyproject_entries_in_all_spellings_and_problems_reported():
    text = src("""
        [tool.forge]
        model = "x"

        [[tool.forge.modules]]
        module = "pkg/layers.py::Attention"
        task = "bench/attention_task.py"

        [[tool.forge.modules]]
        module = "no-separator"
        task = "t.py"

        [[tool.forge.modules]]
        task = "t.py"
    """)
    pp = parse_pyproject_forge(text, PROJECT)
    assert pp.error is None
    assert [(e.file, e.class_name, e.model_class) for e in pp.modules] == [("pkg/layers.py", "Attention", "Model")]
    assert pp.modules[0].task == str(PROJECT / "bench" / "attention_task.py")
    assert len(pp.warnings) == 2 and "path/to/file.py::ClassName" in pp.warnings[0]

    keyed = src("""
        [tool.forge.modules."./pkg/layers.py::Gate"]
        task = "bench/gate_task.py"
        model_class = "GateTask"

        [tool.forge.modules]
        "pkg/layers.py::FeedForward" = "bench/missing_task.py"
    """)
    pp = parse_pyproject_forge(keyed, PROJECT)
    assert [(e.file, e.class_name, e.model_class) for e in pp.modules] == [
        ("pkg/layers.py", "Gate", "GateTask"),
        ("pkg/layers.py", "FeedForward", "Model"),
    ]
    assert pp.warnings == ['"pkg/layers.py::FeedForward": task file bench/missing_task.py does not exist']


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[tool.forge\nmodel = 1", "invalid TOML"),
        ("[tool]\nforge = 3", "must be a table"),
        ("[tool.forge]\nmodules = 5", "must be a table or an array"),
    ],
)
def test_malformed_pyproject_is_reported_not_raised(text, expected):
    pp = parse_pyproject_forge(text, "/ws")
    assert pp.error is not None and expected in pp.error and pp.modules == []


def test_scan_attaches_pyproject_entries_over_kernelbench_ones(project):
    w = WorkspaceIndex(project)
    w.scan()
    by = {(Path(p).name, m.name): m for p, m in w.modules()}
    att = by[("layers.py", "Attention")].inputs
    assert att is not None and att.kind == "pyproject"
    assert att.task_file == str(project / "bench" / "attention_task.py") and att.model_class == "Model"
    assert "pkg/layers.py::Attention" in att.detail
    gate = by[("layers.py", "Gate")].inputs
    assert gate is not None and gate.model_class == "GateTask"
    assert by[("layers.py", "FeedForward")].inputs is None
    assert ("layers.py", "Config") not in by
    task = by[("attention_task.py", "Model")].inputs
    assert task is not None and task.kind == "kernelbench"

    # an explicit entry wins over the file's own get_inputs()
    (project / "pyproject.toml").write_text(
        '[tool.forge.modules]\n"bench/attention_task.py::Model" = "bench/gate_task.py"\n'
    )
    w.scan()
    by = {(Path(p).name, m.name): m for p, m in w.modules()}
    assert by[("attention_task.py", "Model")].inputs.kind == "pyproject"
    assert by[("layers.py", "Attention")].inputs is None


def test_pyproject_entries_resolve_to_loadable_engine_tasks(project):
    from forge_lsp.engine import load_task

    w = WorkspaceIndex(project)
    w.scan()
    for _, m in w.modules():
        if m.inputs is not None:
            assert load_task(m.inputs.task_file, model_class=m.inputs.model_class).model_class == m.inputs.model_class


def test_the_agent_configuration_still_reads_a_pyproject_with_module_entries():
    from forge_lsp.agent.config import load_config

    assert load_config(PROJECT).coder.model == "gpt-4o-mini"


def test_malformed_pyproject_in_a_workspace_is_reported_and_the_rest_indexed(project):
    (project / "pyproject.toml").write_text("[tool.forge\n")
    w = WorkspaceIndex(project)
    w.scan()
    assert w.pyproject.error is not None and "invalid TOML" in w.pyproject.error
    assert {m.name for _, m in w.modules()} >= {"Attention", "FeedForward"}


# --------------------------------------------------------------------------------------------------
# CUDA


def test_kernels_in_cu_and_cuh_files_with_spans(project):
    w = WorkspaceIndex(project)
    w.scan()
    cu = str(project / "kernels" / "softmax.cu")
    kernels = w.get(cu).kernels
    assert [(k.name, k.extern_c) for k in kernels] == [("softmax_rows", True), ("scale_rows", False)]
    lines = (project / "kernels" / "softmax.cu").read_text().splitlines()
    for k in kernels:
        assert lines[k.line][k.column :].startswith(k.name)
    rows, scale = kernels
    assert lines[rows.end_line] == "}" and lines[scale.end_line] == "}"
    assert w.kernel_at(cu, rows.line + 2).name == "softmax_rows"
    assert w.kernel_at(cu, scale.end_line).name == "scale_rows"
    assert w.kernel_at(cu, 2) is None  # the commented-out kernel
    (fill,) = w.get(project / "kernels" / "common.cuh").kernels
    assert fill.name == "fill" and fill.end_line == fill.line  # a declaration


def test_index_file_dispatches_on_suffix():
    assert index_file("/ws/a.CU", "__global__ void k(int n) {}\n").kernels[0].name == "k"
    assert index_file("/ws/a.py", "import torch.nn as nn\nclass A(nn.Module): pass\n").modules[0].name == "A"
    other = index_file("/ws/a.txt", "class A(nn.Module): pass\n")
    assert other.modules == [] and other.kernels == []


# --------------------------------------------------------------------------------------------------
# Bad input


def test_syntax_error_is_reported_and_the_rest_of_the_file_still_indexed():
    text = src("""
        import torch.nn as nn

        class Good(nn.Module):
            def forward(self, x):
                return x

        class Typing(nn.Module):
            def __init__(self, dim, heads):
                super().__init__()

            def forward(self, x):
                return x +

        class AlsoGood(Good):
            pass

        def get_inputs():
            return []
    """)
    idx = index_python("/ws/broken.py", text)
    assert idx.syntax_error_line == 11 and idx.syntax_error.startswith("line 12:")
    by = {m.name: m for m in idx.modules}
    assert set(by) == {"Good", "Typing", "AlsoGood"}
    assert (by["Typing"].line, by["Typing"].end_line) == (6, 11)
    assert by["Typing"].init_params == ["dim", "heads"] and by["Typing"].has_forward
    assert by["AlsoGood"].has_forward and idx.has_get_inputs


@pytest.mark.parametrize(
    "text",
    [
        "def f(:\n",
        "class A(nn.Module:\n    pass\n",
        "x = (" * 300 + "\n",
        '"""never closed\nclass A(nn.Module): pass\n',
        "class A(nn.Module):\n\tif x:\n        pass\n",
        "\x00\x01\x02",
        "",
        "\n\n\n",
        "class A(nn.Module):",
        "if True:\nclass A(nn.Module): pass\n",
        "@\n",
        "class (nn.Module): pass\n" * 50,
        "é" * 1000,
    ],
)
def test_garbage_never_raises(text):
    idx = index_python("/ws/g.py", text)
    assert idx.path == "/ws/g.py"
    index_cuda("/ws/g.cu", text)
    inputs_skeleton("import torch.nn as nn\nclass Z(nn.Module):\n    pass\n" + text.replace("\x00", ""), "Z")


def test_a_class_broken_on_its_header_keeps_its_name():
    text = "import torch.nn as nn\n\nclass Half(nn.Module):\n    def forward(self, x\n\nclass Whole(nn.Module):\n    pass\n"
    idx = index_python("/ws/h.py", text)
    assert idx.syntax_error is not None
    assert {m.name for m in idx.modules} == {"Half", "Whole"}


def test_non_utf8_binary_and_oversized_files(tmp_path):
    (tmp_path / "latin.py").write_bytes(b"import torch.nn as nn\n# caf\xe9\nclass Latin(nn.Module):\n    pass\n")
    (tmp_path / "declared.py").write_bytes(
        b"# -*- coding: latin-1 -*-\nimport torch.nn as nn\nclass Caf\xe9(nn.Module):\n    pass\n"
    )
    (tmp_path / "binary.py").write_bytes(b"class A(nn.Module):\n    pass\n\x00\x00\xff")
    (tmp_path / "big.py").write_text("import torch.nn as nn\nclass Big(nn.Module):\n    pass\n" + "# pad\n" * 500)
    (tmp_path / "big.cu").write_text("__global__ void k(int n) {}\n" + "// pad\n" * 500)
    (tmp_path / "ok.cu").write_text("__global__ void k(int n) {}\n")
    w = WorkspaceIndex(tmp_path, max_file_bytes=2000)
    w.scan()
    latin = w.get(tmp_path / "latin.py")
    assert [m.name for m in latin.modules] == ["Latin"] and "replacement" in latin.notes[0]
    declared = w.get(tmp_path / "declared.py")
    assert [m.name for m in declared.modules] == ["Café"] and "iso-8859-1" in declared.notes[0]
    assert "binary" in w.get(tmp_path / "binary.py").skipped and w.get(tmp_path / "binary.py").modules == []
    for big in ("big.py", "big.cu"):
        assert "2000 bytes" in w.get(tmp_path / big).skipped
    assert [k.name for _, k in w.kernels()] == ["k"]
    assert {m.name for _, m in w.modules()} == {"Latin", "Café"}
    # the editor's text obeys the same limits
    assert w.update(tmp_path / "ok.py", "x = 1\n" * 1000).skipped is not None
    assert w.update(tmp_path / "nul.py", "class A(nn.Module):\x00\n").skipped is not None


def test_skip_dirs_hidden_dirs_and_virtualenvs_are_not_scanned(tmp_path):
    module = "import torch.nn as nn\nclass M(nn.Module):\n    pass\n"
    kept = ["pkg/a.py", "builder/b.py", "src/build_utils/c.py", "venv_tools/d.py"]
    skipped = [
        ".git/x.py",
        ".venv/lib/x.py",
        "venv/x.py",
        "node_modules/x/x.py",
        "pkg/__pycache__/x.py",
        "build/lib/x.py",
        "lib/site-packages/x.py",
        ".hidden/x.py",
        "env/lib/x.py",
        ".tox/py/x.py",
    ]
    for rel in kept + skipped:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(module)
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr\n")  # a virtualenv under any name
    w = WorkspaceIndex(tmp_path)
    w.scan()
    assert sorted(os.path.relpath(p, tmp_path) for p in w.files()) == sorted(kept)


# --------------------------------------------------------------------------------------------------
# Lookups and incremental updates


def test_module_at_covers_decorators_to_the_last_body_line(project):
    w = WorkspaceIndex(project)
    w.scan()
    path = project / "pkg" / "layers.py"
    lines = path.read_text().splitlines()
    att = lines.index("class Attention(nn.Module):")
    assert w.module_at(path, att).name == "Attention"
    assert w.module_at(path, att + 11).name == "Attention"  # `return self.out(att @ v)`
    assert w.module_at(path, att - 1) is None and w.module_at(path, 0) is None
    assert w.module_at(path, lines.index("class Config:") + 1) is None
    assert w.module_at(project / "missing.py", 3) is None and w.kernel_at(path, 3) is None


def test_update_replaces_a_files_entries_and_ignores_stale_versions(project):
    w = WorkspaceIndex(project)
    w.scan()
    path = str(project / "pkg" / "layers.py")
    before = {m.name for m in w.get(path).modules}
    assert before == {"Attention", "Gate", "FeedForward"}
    new = "import torch.nn as nn\n\nclass Renamed(nn.Module):\n    pass\n"
    idx = w.update(path, new, version=3)
    assert [m.name for m in idx.modules] == ["Renamed"] and idx.version == 3
    assert {m.name for p, m in w.modules() if p == path} == {"Renamed"}
    assert w.module_at(path, 2).name == "Renamed"
    assert w.update(path, "class Old(nn.Module): pass\n", version=2).version == 3  # stale: ignored
    assert [m.name for m in w.get(path).modules] == ["Renamed"]
    same = w.update(path, new, version=4)  # same text: same index, new version
    assert same.version == 4 and same.content_hash == idx.content_hash

    w.scan()  # the editor's text wins over the disk's while the file is open
    assert [m.name for m in w.get(path).modules] == ["Renamed"]
    assert {m.name for m in w.refresh(path).modules} == before  # closed: back to the disk
    w.remove(path)
    assert w.get(path) is None and all(p != path for p, _ in w.modules())

    fresh = project / "pkg" / "fresh.py"
    fresh.write_text(new)
    assert [m.name for m in w.refresh(fresh).modules] == ["Renamed"]
    fresh.unlink()
    assert w.refresh(fresh) is None and w.get(fresh) is None


def test_editing_pyproject_reattaches_inputs(project):
    w = WorkspaceIndex(project)
    w.scan()
    layers = project / "pkg" / "layers.py"
    ff = layers.read_text().splitlines().index("class FeedForward(nn.Module):") + 2
    assert w.module_at(layers, ff).name == "FeedForward" and w.module_at(layers, ff).inputs is None
    text = (project / "pyproject.toml").read_text() + (
        '\n[[tool.forge.modules]]\nmodule = "pkg/layers.py::FeedForward"\ntask = "bench/attention_task.py"\n'
    )
    w.update(project / "pyproject.toml", text, version=1)
    assert w.module_at(layers, ff).inputs.kind == "pyproject"
    broken = w.update(project / "pyproject.toml", "[tool.forge", version=2)
    assert "invalid TOML" in broken.notes[0]
    assert all(m.inputs is None for p, m in w.modules() if p == str(layers))
    w.refresh(project / "pyproject.toml")  # back to the file on disk
    assert w.module_at(layers, ff).inputs is None
    assert {m.name for p, m in w.modules() if p == str(layers) and m.inputs} == {"Attention", "Gate"}


def test_concurrent_updates_keep_the_latest_version(tmp_path):
    w = WorkspaceIndex(tmp_path)
    path = str(tmp_path / "m.py")

    def text(i: int) -> str:
        return f"import torch.nn as nn\n\nclass V{i}(nn.Module):\n    pass\n"

    def worker(start: int) -> None:
        for i in range(start, 400, 4):
            w.update(path, text(i), version=i)
            w.module_at(path, 2)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert w.get(path).version == 399 and [m.name for m in w.get(path).modules] == ["V399"]


@pytest.mark.integration  # starts a process
def test_importing_the_workspace_package_pulls_no_torch_or_editor_library():
    code = (
        "import sys, forge_lsp.workspace, forge_lsp.workspace.skeleton; "
        "print(','.join(m for m in ('torch', 'triton', 'pygls', 'lsprotocol') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


# --------------------------------------------------------------------------------------------------
# The inputs skeleton

CASES = {  # fixture -> classes
    "linear.py": ["Model"],
    "conv2d.py": ["ConvBlock"],
    "layernorm.py": ["Model", "PreNorm"],
    "mlp.py": ["MLP"],
    "embedding.py": ["TinyLM"],
    "matmul.py": ["Model", "BatchedScaled"],
    "reduction.py": ["Model"],
}


def _with_skeleton(name: str, cls: str, exact: bool) -> str:
    text = (SKELETONS / name).read_text()
    return apply_insertions(text, skeleton_edits(text, cls) if exact else inputs_skeleton(text, cls))


@pytest.mark.parametrize("exact", [False, True])
def test_skeleton_code_parses_and_defines_the_missing_functions(exact):
    for name, classes in CASES.items():
        for cls in classes:
            new = _with_skeleton(name, cls, exact)
            tree = ast.parse(new)
            defined = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
            assert defined.count("get_inputs") == 1 and defined.count("get_init_inputs") == 1, (name, cls)
            idx = index_python("/ws/" + name, new)
            assert next(m for m in idx.modules if m.name == cls).inputs is not None


def test_skeleton_sizes_are_inferred_from_the_constructor():
    def skel(name: str, cls: str) -> str:
        return inputs_skeleton((SKELETONS / name).read_text(), cls)[1]

    linear = skel("linear.py", "Model")
    assert "torch.randn(batch_size, in_features)" in linear and "return [in_features, out_features]" in linear
    assert linear.lstrip().startswith("import torch")  # the file only imports torch.nn
    conv = skel("conv2d.py", "ConvBlock")
    assert "torch.randn(batch_size, in_channels, height, width)" in conv
    assert "return [in_channels, out_channels]" in conv  # kernel_size and stride keep their defaults
    assert "import torch" not in conv
    ln = skel("layernorm.py", "Model")
    assert "normalized_shape = (64,)" in ln and "torch.randn(batch_size, *normalized_shape)" in ln
    pre = skel("layernorm.py", "PreNorm")
    assert "dim = 256" in pre and "torch.randn(batch_size, seq_len, dim)" in pre  # the default, via self.dim
    assert "TODO: assumed to have the shape of x" in pre  # the residual input is a guess, and says so
    mlp = skel("mlp.py", "MLP")
    assert "torch.randn(batch_size, d_in)" in mlp and "return [d_in]" in mlp
    emb = skel("embedding.py", "TinyLM")
    assert "torch.randint(0, vocab_size, (batch_size, seq_len))" in emb and "return [vocab_size, d_model]" in emb
    mm = skel("matmul.py", "Model")
    assert "torch.randn(M, K), torch.randn(K, N)" in mm and "return []" in mm
    bmm = skel("matmul.py", "BatchedScaled")
    assert "torch.randn(batch_size, M, K), torch.randn(batch_size, K, N), scale" in bmm
    red = skel("reduction.py", "Model")  # get_inputs exists: only get_init_inputs, dim is an axis
    assert "def get_inputs" not in red and "dim = 1" in red and "batch_size =" not in red
    assert "TODO" not in linear + conv + ln + mlp + emb + mm + bmm + red


@pytest.mark.slow
def test_skeleton_runs_with_torch(tmp_path):
    """Each file + its skeleton, executed with torch in a subprocess: construct and call forward."""
    pytest.importorskip("torch")
    files = []
    for name, classes in CASES.items():
        for cls in classes:
            for exact in (False, True):
                path = tmp_path / f"{Path(name).stem}_{cls}_{int(exact)}.py"
                path.write_text(_with_skeleton(name, cls, exact))
                files.append((str(path), cls))
    script = textwrap.dedent("""
        import json, runpy, sys
        import torch
        results = {}
        for path, cls in json.loads(sys.argv[1]):
            ns = runpy.run_path(path, run_name="skeleton_check")
            model = ns[cls](*ns["get_init_inputs"]())
            with torch.no_grad():
                out = model(*ns["get_inputs"]())
            results[path] = list(out.shape)
        print(json.dumps(results))
    """)
    out = subprocess.run(
        [sys.executable, "-c", script, json.dumps(files)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr[-3000:]
    shapes = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(shapes) == len(files)
    assert shapes[str(tmp_path / "linear_Model_1.py")] == [16, 64]
    assert shapes[str(tmp_path / "conv2d_ConvBlock_0.py")] == [16, 16, 32, 32]


def test_skeleton_edits_put_the_import_with_the_other_imports():
    text = (SKELETONS / "linear.py").read_text()
    edits = skeleton_edits(text, "Model")
    assert edits[0].line == 1 and edits[0].text == "import torch\n"  # after the docstring, before torch.nn
    new = apply_insertions(text, edits)
    assert new.splitlines()[1:3] == ["import torch", "import torch.nn as nn"]
    assert new.count("import torch\n") == 1
    with_future = "from __future__ import annotations\n" + text.split('"""\n', 2)[-1]
    assert skeleton_edits(with_future, "Model")[0].line == 1


def test_skeleton_placeholders_say_todo_when_the_shape_is_unknown():
    text = src("""
        import torch
        import torch.nn as nn

        class Flat(nn.Module):
            def __init__(self, n_out):
                super().__init__()
                self.fc = nn.Linear(320, n_out)

            def forward(self, x):
                return self.fc(x.view(-1, 320))

        class Elementwise(nn.Module):
            def forward(self, x, y):
                return x * y + 1
    """)
    flat = inputs_skeleton(text, "Flat")[1]
    assert "torch.randn(batch_size, 320),  # TODO: guessed from the first layer in __init__" in flat
    assert "n_out = 64" in flat
    elem = inputs_skeleton(text, "Elementwise")[1]
    assert "torch.randn(batch_size, dim),  # TODO: set the real shape" in elem
    assert "# TODO: assumed to have the shape of x" in elem
    inherited = inputs_skeleton("import torch\nimport torch.nn as nn\nclass L(nn.Linear):\n    pass\n", "L")[1]
    assert "# TODO: the constructor comes from nn.Linear: add its arguments" in inherited


def test_skeleton_avoids_name_clashes_and_reuses_constants():
    text = src("""
        import torch
        import torch.nn as nn
        from data import batch_size

        in_channels = 3

        def height():
            return 5

        class Net(nn.Module):
            def __init__(self, in_channels, out_channels):
                super().__init__()
                self.conv = nn.Conv2d(in_channels, out_channels, 3)

            def forward(self, x):
                return self.conv(x)
    """)
    skel = inputs_skeleton(text, "Net")[1]
    assert "BATCH_SIZE = 16" in skel and "HEIGHT = 32" in skel and "width = 32" in skel
    assert "in_channels =" not in skel  # the file's constant is reused
    assert "torch.randn(BATCH_SIZE, in_channels, HEIGHT, width)" in skel
    ast.parse(apply_insertions(text, inputs_skeleton(text, "Net")))


def test_skeleton_positions_at_end_of_file_and_between_statements():
    no_newline = "import torch.nn as nn\nclass A(nn.Module):\n    def forward(self, x):\n        return x"
    line, text = inputs_skeleton(no_newline, "A")
    assert line == 4 and text.startswith("\n\n")
    for new in (
        apply_insertions(no_newline, (line, text)),
        apply_insertions(no_newline, skeleton_edits(no_newline, "A")),
    ):
        ast.parse(new)
        assert "        return x\n\n\n" in new
    followed = "import torch\nimport torch.nn as nn\nclass A(nn.Module):\n    pass\nx = 1\n"
    line, text = inputs_skeleton(followed, "A")
    assert line == 4
    new = apply_insertions(followed, (line, text))
    assert new.endswith("\n\n\nx = 1\n") and "    pass\n\n\n# Example inputs for A" in new
    complete = (
        "import torch.nn as nn\nclass A(nn.Module):\n    pass\ndef get_inputs(): ...\ndef get_init_inputs(): ...\n"
    )
    assert inputs_skeleton(complete, "A") == (3, "") and skeleton_edits(complete, "A") == []
    with pytest.raises(ValueError):
        inputs_skeleton(followed, "Missing")


def test_skeleton_in_a_file_with_a_syntax_error_elsewhere():
    text = src("""
        import torch.nn as nn

        class Broken(nn.Module):
            def forward(self, x):
                return x +

        class Fine(nn.Module):
            def __init__(self, features):
                super().__init__()
                self.fc = nn.Linear(features, 8)

            def forward(self, x):
                return self.fc(x)
    """)
    skel = inputs_skeleton(text, "Fine")[1]
    assert "torch.randn(batch_size, features)" in skel
    broken = inputs_skeleton(text, "Broken")[1]  # only its header is known: placeholders
    ast.parse(broken.replace("\n\n", "\n"))
    assert "TODO" in broken


# --------------------------------------------------------------------------------------------------
# Chunked parsing (what makes update() cheap) gives the same answer as a whole-file parse

TRICKY = [
    'class A(nn.Module):\n    """Docs\nclass Fake(nn.Module):\n    pass\n"""\n\nclass B(A):\n    pass\n',
    '"""Module docs.\n\nUsage:\nclass NotReal(nn.Module): ...\n"""\nimport torch.nn as nn\nclass C(nn.Module):\n    pass\n',
    "@decorator(\n    arg=1,\n)\nclass D(nn.Module):\n    pass\n",
    "@a\n\n# comment\n@b\nclass E(nn.Module):\n    pass\n",
    "x = [\n1,\nclass_ := 2,\n]\nclass F(nn.Module):\n    pass\n",
    "x = 1 + \\\ny\nclass G(nn.Module):\n    pass\n",
    's = \'"""\'\nclass H(nn.Module):\n    pass\nt = \'"""\'\n',
    "# '''\nclass I(nn.Module):\n    pass\n",
    "try:\n    import torch.nn as nn\nexcept ImportError:\n    nn = None\nelse:\n    pass\nfinally:\n    pass\nclass J(nn.Module):\n    pass\n",
    "if x:\n    pass\nelif y:\n    pass\nelse:\n    class K(nn.Module):\n        pass\n",
    "def get_inputs():\n    return [1,\n2]\ndef get_init_inputs():\n    return []\nclass L(nn.Module):\n    pass\n",
    "x = '''\n'''\ny = \"\"\"\n'''\n\"\"\"\nclass M(nn.Module):\n    pass\n",
]


def _facts_key(classes, aliases, functions):
    return (
        [
            (
                c.name,
                c.line,
                c.column,
                c.name_column,
                c.start_line,
                c.end_line,
                tuple(c.bases),
                c.init,
                c.forward,
                c.has_own_forward,
                c.init_arity,
                c.forward_arity,
            )
            for c in classes
        ],
        sorted(aliases.items()),
        sorted(functions.items()),
    )


def _chunked_vs_whole(text: str):
    from forge_lsp.workspace.index import _facts_from_stmts, _python_facts, split_lines

    lines = split_lines(text)
    classes, aliases, functions, error, broken = _python_facts(text, lines, 0)
    assert error is None and not broken
    whole = _facts_from_stmts(ast.parse(text).body, lines, 0)
    assert _facts_key(classes, aliases, functions) == _facts_key(
        list(whole.classes), dict(whole.aliases), dict(whole.functions)
    )


@pytest.mark.parametrize("text", TRICKY)
def test_chunked_parse_equals_whole_file_parse_on_tricky_layouts(text):
    _chunked_vs_whole(text)


@pytest.mark.integration
def test_chunked_parse_equals_whole_file_parse_on_this_repository():
    root = Path(__file__).resolve().parents[1]
    files = [p for d in ("forge_lsp", "tests", "benchmarks") for p in (root / d).rglob("*.py")]
    assert len(files) > 50
    for path in files:
        text = path.read_text(encoding="utf-8")
        try:
            ast.parse(text)
        except SyntaxError:
            continue
        _chunked_vs_whole(text)


def test_an_edit_reparses_only_the_chunk_it_touches():
    from forge_lsp.workspace.index import _chunk_facts

    body = "".join(
        f"class Layer{i}(nn.Module):\n    def forward(self, x):\n        return x * {i}\n\n" for i in range(50)
    )
    text = "import torch.nn as nn\n\n" + body
    index_python("/ws/big.py", text)
    before = _chunk_facts.cache_info()
    idx = index_python("/ws/big.py", text.replace("return x * 17", "return x * 17 + 1"))
    after = _chunk_facts.cache_info()
    assert after.misses - before.misses == 1 and after.hits - before.hits == 50
    assert len(idx.modules) == 50 and idx.modules[17].name == "Layer17"


@pytest.mark.integration
def test_an_older_text_arriving_while_a_newer_one_is_indexed_does_not_replace_it(tmp_path):
    """Version 2 is being indexed on one thread when version 1 arrives on another: version 2 is what stays."""
    indexing, release = threading.Event(), threading.Event()

    class Slow(WorkspaceIndex):
        def _index_text(self, key, text, version, pp):
            if version == 2:
                indexing.set()
                release.wait(10)
            return super()._index_text(key, text, version, pp)

    w = Slow(tmp_path)
    path = str(tmp_path / "m.py")

    def text(i: int) -> str:
        return f"import torch.nn as nn\n\nclass V{i}(nn.Module):\n    pass\n"

    newer = threading.Thread(target=lambda: w.update(path, text(2), version=2))
    newer.start()
    assert indexing.wait(10)
    w.update(path, text(1), version=1)  # late, out of order
    release.set()
    newer.join()
    assert w.get(path).version == 2 and [m.name for m in w.get(path).modules] == ["V2"]
