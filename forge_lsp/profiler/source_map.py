"""Lines of generated sources mapped back to the Python string literal they came from.

`load_inline` writes the candidate's `cuda_sources` / `cpp_sources` strings into files of its build folder (torch
prepends its includes to `cuda.cu` and `main.cpp`), and the compiler's line info, hence Nsight Compute's hot lines,
point into those files. The user sees the `.py` file that holds the string: line L of the generated file is the
line of the literal whose text holds it. Pure: texts in, a line number out.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..parsing import parse
from .model import ProfileResult


@dataclass(frozen=True)
class Literal:
    """A string literal of a Python file whose value's lines are its source lines, one for one."""

    value: str
    first_line: int  # 1-based line of the file where the value's first line is


def literals(py_source: str) -> list[Literal]:
    """The file's multi-line string literals whose lines map one for one (a triple-quoted string, raw or not,
    without line continuations); implicitly joined strings and escaped newlines do not."""
    try:
        tree = parse(py_source)
    except SyntaxError:
        return []
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or "\n" not in node.value:
            continue
        if node.end_lineno is None or node.end_lineno - node.lineno != node.value.count("\n"):
            continue  # "a\n" "b\n", or "\n" escapes on one line: the value's lines are not the file's
        out.append(Literal(node.value, node.lineno))
    return out


def literal_line(py_source: str, generated: str, line: int) -> int | None:
    """Line `line` (1-based) of `generated` as the line of `py_source` it came from. First, the one place in the
    file's literals where the lines around it appear, the window as wide as makes it unique (a build may have
    changed other lines of the literal, such as its includes); for a line its neighbours do not tell apart, the
    longest literal whose whole text holds it in `generated`. None when no literal of the file holds it (torch's
    own includes), or when the same lines appear twice and which one ran cannot be told."""
    return _line_in(literals(py_source), generated, line)


def _line_in(lits: list[Literal], generated: str, line: int) -> int | None:
    """`literal_line` over a file's literals, parsed once for all the lines asked of it."""
    lines = generated.split("\n")
    if not 1 <= line <= len(lines):
        return None
    if lines[line - 1].strip():
        for width in (3, 2, 1, 0):
            lo, hi = max(line - 1 - width, 0), min(line + width, len(lines))
            window = "\n".join(lines[lo:hi])
            found = []
            for lit in lits:
                at = lit.value.find(window)
                while at >= 0:
                    if at == 0 or lit.value[at - 1] == "\n":  # whole lines only
                        found.append(lit.first_line + lit.value.count("\n", 0, at) + (line - 1 - lo))
                    at = lit.value.find(window, at + 1)
            if len(found) == 1:
                return found[0]
            if len(found) > 1 and width == 0:
                break  # the same line in several places, whatever its neighbours: the whole literals may tell
    for lit in sorted(lits, key=lambda lit: -len(lit.value)):
        start = generated.find(lit.value)
        while start >= 0:
            first = generated.count("\n", 0, start) + 1
            if first <= line <= first + lit.value.count("\n"):
                return lit.first_line + (line - first)
            start = generated.find(lit.value, start + 1)
    return None


GENERATED_SUFFIXES = (".cu", ".cpp", ".cuh", ".cc")


def map_hot_lines(result: ProfileResult, py_source: str, py_path: str, copies: Mapping[str, str] | None = None) -> int:
    """Point the hot lines of `result` at the user's own file. A line in a generated source (load_inline's `cuda.cu`,
    `main.cpp`, read from disk, or an NVRTC program, read from `result.sources`) moves to the line of the `.py` file
    (`py_source`, shown as `py_path`) whose string literal it came from; a line in a copy of the user's file (the
    worker's copy of the task or the candidate, by file name in `copies`, such as a Triton kernel's) moves to the same
    line of the user's file. The place the compiler named is kept in `HotLine.compiled_as`. Returns how many lines
    were mapped."""
    texts: dict[str, str | None] = {}
    lits = literals(py_source)
    copies = copies or {}
    mapped = 0
    for kernel in result.kernels:
        for h in kernel.hot_lines:
            if h.compiled_as:
                continue
            name = Path(h.file).name
            if name in copies:
                h.compiled_as, h.file = f"{h.file}:{h.line}", copies[name]
                mapped += 1
                continue
            if Path(h.file).suffix not in GENERATED_SUFFIXES:
                continue
            if h.file not in texts:
                texts[h.file] = _generated_text(result, h.file)
            generated = texts[h.file]
            line = _line_in(lits, generated, h.line) if generated is not None else None
            if line is not None:
                h.compiled_as, h.file, h.line = f"{h.file}:{h.line}", py_path, line
                mapped += 1
    return mapped


def _generated_text(result: ProfileResult, file: str) -> str | None:
    """The text of a generated source: a program the profiled process compiled (NVRTC's are no files; their line info
    names them by the program's name in the compiling process's working folder), else the file."""
    text = result.sources.get(file)
    if text is None:
        text = result.sources.get(Path(file).name)
    if text is not None:
        return text
    try:
        return Path(file).read_text(errors="replace")
    except OSError:
        return None
