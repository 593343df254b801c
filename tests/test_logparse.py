"""Compiler and traceback messages mapped to files and lines (logs as the tools print them)."""

from __future__ import annotations

from forge_lsp.engine.logparse import compile_errors, errors_for, traceback_error

NVRTC = """strided_copy.cu(7): error: identifier "colz" is undefined
      y[i] = x[(long long)r * colz + c];
                              ^

1 error detected in the compilation of "strided_copy.cu".
"""

NVCC = """/home/u/.cache/forge-lsp/torch_extensions/ext_1/cuda.cu(12): error: expected a ";"
/home/u/.cache/forge-lsp/torch_extensions/ext_1/cuda.cu(20): warning #177-D: variable "n" was declared but never referenced
"""

GCC = """main.cpp:5:3: error: 'foo' was not declared in this scope
    5 |   foo();
      |   ^~~
"""

TRACEBACK = """Traceback (most recent call last):
  File "/work/forge_lsp/profiler/target.py", line 40, in main
    model = getattr(task_mod, "Model")(*init)
  File "/home/u/project/layers.py", line 17, in __init__
    self.proj = nn.Linear(d, d * 4)
  File "/usr/lib/python3/site-packages/torch/nn/modules/linear.py", line 99, in __init__
    raise ValueError("in_features must be positive")
ValueError: in_features must be positive
"""


def test_nvrtc_and_nvcc_errors_with_lines_and_severity():
    (e,) = compile_errors(NVRTC)
    assert (e.file, e.line, e.severity) == ("strided_copy.cu", 7, "error") and "colz" in e.message
    errs = compile_errors(NVCC)
    assert [(x.line, x.severity) for x in errs] == [(12, "error"), (20, "warning")]
    assert errs[1].message.startswith("variable")


def test_gcc_errors_keep_the_column():
    (e,) = compile_errors(GCC)
    assert (e.file, e.line, e.column) == ("main.cpp", 5, 2)


def test_traceback_points_at_the_users_file_not_the_library():
    e = traceback_error(TRACEBACK, ["layers.py"])
    assert (e.line, e.message) == (17, "ValueError: in_features must be positive")
    assert traceback_error(TRACEBACK, ["other.py"]) is None


def test_errors_for_filters_by_file():
    assert [e.line for e in errors_for(NVRTC + NVCC, "/abs/path/strided_copy.cu")] == [7]
    assert errors_for(NVRTC, "unrelated.cu") == []
    assert [e.line for e in errors_for(TRACEBACK, "/home/u/project/layers.py")] == [17]
