"""Indexing of one CUDA file: its ``__global__`` kernels (found by
`forge_lsp.workspace.cuda_source.global_kernels`) with the line range each spans."""

from __future__ import annotations

import re

from .cuda_source import global_kernels
from .results import FileIndex, KernelInfo, content_hash, empty_index

_CUDA_BLANK = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.DOTALL)


def _kernel_end(clean: str, offset: int) -> int:
    """Offset of the last character of the kernel whose name starts at `offset` (its `}` or `;`)."""
    i = clean.find("(", offset)
    if i < 0:
        return offset
    depth = 0
    n = len(clean)
    while i < n:
        ch = clean[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                break
        i += 1
    m = re.compile(r"[{;]").search(clean, i)
    if m is None:
        return n - 1
    if m.group(0) == ";":
        return m.start()
    depth = 0
    for j in range(m.start(), n):
        if clean[j] == "{":
            depth += 1
        elif clean[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return n - 1


def index_cuda(path: str, text: str, *, version: int | None = None) -> FileIndex:
    """Index one CUDA file's text (``__global__`` kernels). Never raises."""
    if "\x00" in text:
        return empty_index(path, text, version, skipped="binary file (contains NUL bytes)")
    try:
        found = global_kernels(text)
        clean = _CUDA_BLANK.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
        starts = [0] + [m.end() for m in re.finditer("\n", text)]
        kernels = []
        for k in found:
            offset = starts[k.line] + k.column if k.line < len(starts) else 0
            end = _kernel_end(clean, offset)
            kernels.append(
                KernelInfo(
                    name=k.name,
                    line=k.line,
                    column=k.column,
                    extern_c=k.extern_c,
                    end_line=max(k.line, text.count("\n", 0, end)),
                )
            )
    except Exception as exc:  # noqa: BLE001
        return empty_index(path, text, version, notes=[f"internal error while indexing: {type(exc).__name__}: {exc}"])
    return FileIndex(path=path, version=version, content_hash=content_hash(text), kernels=kernels)
