"""Find `__global__` kernels in CUDA source text, without a compiler.

Used by `forge explain FILE.cu` (which kernel to profile) and by the language server's index.
Comments and string literals are blanked first (keeping offsets), so commented-out kernels do
not count; line and column are 0-based, pointing at the kernel's name.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

_COMMENT_OR_STRING = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', re.DOTALL)
_GLOBAL = re.compile(r"\b__global__\b")
_TOKEN = re.compile(
    r"\s*(?:(?P<attr>__launch_bounds__|__maxnreg__|__cluster_dims__)\s*\([^)]*\)|(?P<ident>[A-Za-z_]\w*))"
)
_NOT_A_NAME = {"void", "static", "inline", "__forceinline__", "__noinline__", "extern", "__host__", "__device__"}


@dataclass(frozen=True)
class CudaKernel:
    name: str
    line: int
    column: int
    extern_c: bool


def _blank(match: re.Match[str]) -> str:
    return re.sub(r"[^\n]", " ", match.group(0))


def global_kernels(text: str) -> list[CudaKernel]:
    """Every `__global__` function definition or declaration in `text`, in source order."""
    clean = _COMMENT_OR_STRING.sub(_blank, text)
    extern_c_blocks = [
        (m.start(), _block_end(clean, m.end() - 1))
        for m in re.finditer(
            r'extern\s+"C"\s*\{',
            _COMMENT_OR_STRING.sub(lambda m: m.group(0) if m.group(0) == '"C"' else _blank(m), text),
        )
    ]
    kernels = []
    for m in _GLOBAL.finditer(clean):
        name, start, pos = None, -1, m.end()
        while (tok := _TOKEN.match(clean, pos)) is not None:
            pos = tok.end()
            if tok.group("ident") and tok.group("ident") not in _NOT_A_NAME:
                name, start = tok.group("ident"), tok.start("ident")
                break
        if name is None or not re.match(r"\s*(?:<[^;{]*>\s*)?\(", clean[pos : pos + 200]):
            continue
        line = clean.count("\n", 0, start)
        column = start - (clean.rfind("\n", 0, start) + 1)
        prefix = text[max(0, m.start() - 20) : m.start()]
        extern_c = 'extern "C"' in prefix or any(a <= m.start() < b for a, b in extern_c_blocks)
        kernels.append(CudaKernel(name, line, column, extern_c))
    return kernels


def _block_end(text: str, open_brace: int) -> int:
    depth = 0
    for i in range(open_brace, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(text)


_SKIP_DIRS = {".venv", "venv", "node_modules", ".git", "site-packages", "__pycache__", "build", ".tox"}


def _python_files(base: Path, max_depth: int) -> list[Path]:
    """Python files under `base` down to `max_depth` folders, shallowest first, skipping env/VCS folders."""
    found: list[tuple[int, str, Path]] = []
    for folder, dirs, files in os.walk(base):
        depth = len(Path(folder).relative_to(base).parts)
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith(".")) if depth < max_depth else []
        found += [(depth, f, Path(folder) / f) for f in files if f.endswith(".py")]
    return [p for _, _, p in sorted(found)]


def python_files_loading(
    cu_file: Path, *, root: Path | None = None, max_depth: int = 3, limit: int = 2000
) -> list[Path]:
    """Python files that name `cu_file` in a string: the scripts that load (and launch) it.

    Searched: `root`, else the .cu file's folder and then its parent, shallowest files first, at
    most `limit` files read. A loader names the file (`load(sources=["k.cu"])`, `open("../k.cu")`,
    `Path(__file__).with_name("k.cu")`).
    """
    cu_file = cu_file.resolve()
    named = re.compile(r"[\"'/\\]" + re.escape(cu_file.name) + r"[\"']")
    seen: set[Path] = set()
    found: list[Path] = []
    for base in [root] if root else [cu_file.parent, cu_file.parent.parent]:
        for py in _python_files(Path(base), max_depth):
            py = py.resolve()
            if py in seen:
                continue
            seen.add(py)
            if len(seen) > limit:
                return found
            try:
                text = py.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if named.search(text):
                found.append(py)
    return found
