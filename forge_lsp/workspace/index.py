"""The language server's workspace model: nn.Modules, their example inputs, and CUDA kernels.

Everything here reads source text only (``ast`` for Python, regexes for CUDA): no user code is
executed and neither torch nor any editor library is imported, so the server process stays light.

What is indexed
---------------
* ``.py`` files: module-level ``nn.Module`` subclasses (`ModuleInfo`) and where their example inputs
  come from (`InputsSource`). A class is a module when a base is ``torch.nn.Module`` or another
  ``torch.nn`` class however it was imported (``import torch``, ``import torch.nn as nn``,
  ``from torch import nn``, ``from torch.nn import Module as M``...), a bare ``nn.X`` even without
  an import (files being edited), a Lightning ``LightningModule``, or a class of the same file that
  is itself a module (transitively). Classes inside top-level ``if``/``try`` blocks count; classes
  nested in functions or classes do not. Bases imported from other workspace files are not
  followed.
* ``.cu`` / ``.cuh`` files: ``__global__`` kernels (`KernelInfo`, via
  `forge_lsp.workspace.cuda_source.global_kernels`).

Positions are 0-based lines and 0-based columns counted in Python ``str`` indices (code points) of
the text as given; the server converts to the client's encoding with pygls' position codec. Lines
are separated by ``\\n``, ``\\r\\n`` or ``\\r`` (as in LSP and in Python's tokenizer). Every ``end_line``
is inclusive.

Example inputs
--------------
Explicit configuration wins over convention:

1. ``pyproject`` (kind ``"pyproject"``): an entry under ``[tool.forge.modules]`` of the workspace's
   ``pyproject.toml`` names the KernelBench task file for a class (see `parse_pyproject_forge`).
2. ``kernelbench``: the file defines both ``get_inputs()`` and ``get_init_inputs()`` at module level.
   They are attributed to the class named ``Model``, to the only module of the file, and to every
   module whose constructor and ``forward`` accept as many positional arguments as the two
   functions' literal return lists hold (so a ``ModelNew`` next to its ``Model`` gets them too,
   while a helper ``Block`` with another constructor does not). When none of these apply (several
   modules, non-literal return values), every module whose arity cannot be checked gets them.
   The engine's ``load_task(path, model_class=...)`` takes the class name from
   `InputsSource.model_class`.

Speed: a ``.py`` file is cut into chunks of top-level statements that are parsed separately and
cached by their text, so an edit re-parses only the chunk it touches (see `_python_facts` for why the
result equals a whole-file parse).

Robustness: nothing here raises on bad input. A ``.py`` file with a syntax error is indexed piecewise
(the chunks that parse give their classes exactly; a broken chunk keeps its class header, constructor
parameters and ``forward`` via regexes) and the first error is reported in `FileIndex.syntax_error` /
``syntax_error_line``. `scan` skips oversized and binary files with a `FileIndex.skipped` reason and
decodes non-UTF-8 files with replacement characters (noted in `FileIndex.notes`).

Layout: `results` holds the result types, `pyproject` reads ``[tool.forge]``, `python_facts` reads a
Python file's classes, imports and functions (chunked, cached parse), `python_index` and `cuda_index`
index one file; this module picks the indexer by suffix, reads files from disk and keeps the
workspace (`WorkspaceIndex`). The names of the siblings that other code reads are re-exported here.
"""

from __future__ import annotations

import os
import threading
import tokenize
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path

from .cuda_index import index_cuda
from .pyproject import ForgeModuleEntry, PyProjectForge, parse_pyproject_forge, read_pyproject_forge
from .python_facts import (
    KERNELBENCH_FUNCTIONS,
    _chunk_facts,
    _classes_from_broken_chunk,
    _facts_from_stmts,
    _parse_tolerant,
    _python_facts,
    _top_level,
    import_aliases,
    parse,
    qualify,
    split_lines,
    torch_nn_class,
)
from .python_index import index_python
from .results import FileIndex, InputsSource, KernelInfo, ModuleInfo, content_hash, empty_index

__all__ = [
    "CUDA_SUFFIXES",
    "KERNELBENCH_FUNCTIONS",
    "PYTHON_SUFFIXES",
    "SKIP_DIRS",
    "FileIndex",
    "ForgeModuleEntry",
    "InputsSource",
    "KernelInfo",
    "ModuleInfo",
    "PyProjectForge",
    "WorkspaceIndex",
    "_chunk_facts",
    "_classes_from_broken_chunk",
    "_facts_from_stmts",
    "_parse_tolerant",
    "_python_facts",
    "_top_level",
    "content_hash",
    "decode_source",
    "import_aliases",
    "index_cuda",
    "index_file",
    "index_python",
    "is_indexed_path",
    "parse",
    "parse_pyproject_forge",
    "qualify",
    "read_pyproject_forge",
    "read_source",
    "split_lines",
    "torch_nn_class",
]

PYTHON_SUFFIXES = (".py",)
CUDA_SUFFIXES = (".cu", ".cuh")

#: Folders never scanned (besides every hidden folder and every virtualenv, found by its pyvenv.cfg).
SKIP_DIRS = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__", "build", "site-packages", ".tox"})


def index_file(
    path: str, text: str, *, pyproject: PyProjectForge | None = None, version: int | None = None
) -> FileIndex:
    """`index_python` for .py, `index_cuda` for .cu/.cuh, an empty index for anything else."""
    low = path.lower()
    if low.endswith(PYTHON_SUFFIXES):
        return index_python(path, text, pyproject=pyproject, version=version)
    if low.endswith(CUDA_SUFFIXES):
        return index_cuda(path, text, version=version)
    return empty_index(path, text, version)


def is_indexed_path(path: str) -> bool:
    return path.lower().endswith(PYTHON_SUFFIXES + CUDA_SUFFIXES)


# --------------------------------------------------------------------------------------------------
# Reading files from disk


def decode_source(data: bytes) -> tuple[str, list[str]]:
    """Bytes -> text the way an editor would show them, with notes about anything lossy."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError as exc:
        first = f"not valid UTF-8 (byte {exc.start})"
    try:  # a PEP 263 coding declaration (latin-1 sources...)
        encoding, _ = tokenize.detect_encoding(BytesIO(data).readline)
        if encoding not in ("utf-8", "utf-8-sig"):
            return data.decode(encoding), [f"decoded as {encoding} (its coding declaration)"]
    except (SyntaxError, LookupError, UnicodeDecodeError):
        pass
    return data.decode("utf-8", errors="replace"), [f"{first}: decoded with replacement characters"]


def read_source(path: str, max_file_bytes: int) -> tuple[str | None, str | None, list[str]]:
    """(text, skipped reason, notes) for a file on disk."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_file_bytes + 1)
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}", []
    if len(data) > max_file_bytes:
        return None, f"larger than the index limit of {max_file_bytes} bytes", []
    if b"\x00" in data:
        return None, "binary file (contains NUL bytes)", []
    text, notes = decode_source(data)
    return text, None, notes


def _norm(path: str | Path) -> str:
    return os.path.normpath(os.path.abspath(os.fspath(path)))


# --------------------------------------------------------------------------------------------------
# The workspace


class WorkspaceIndex:
    """Index of one workspace folder; thread-safe, updated file by file.

    Keys are normalized absolute paths. Files the editor has sent (`update`) are owned by the editor
    until `refresh` or `remove`: a `scan` does not replace them with what is on disk. Editing the
    root ``pyproject.toml`` (through `update` or `refresh`) re-attaches the inputs of the modules its
    old and new entries name.
    """

    def __init__(self, root: str | Path, *, max_file_bytes: int = 1_000_000):
        self.root = _norm(root)
        self.max_file_bytes = max_file_bytes
        self._lock = threading.RLock()
        self._files: dict[str, FileIndex] = {}
        self._open: dict[str, tuple[str, int | None]] = {}
        self._pyproject = PyProjectForge(root=self.root)
        self._pyproject_path = os.path.join(self.root, "pyproject.toml")
        self._generation = 0

    # -- reading ---------------------------------------------------------------------------------

    @property
    def pyproject(self) -> PyProjectForge:
        with self._lock:
            return self._pyproject

    def get(self, path: str | Path) -> FileIndex | None:
        with self._lock:
            return self._files.get(_norm(path))

    def files(self) -> list[str]:
        with self._lock:
            return sorted(self._files)

    def __len__(self) -> int:
        with self._lock:
            return len(self._files)

    def module_at(self, path: str | Path, line: int) -> ModuleInfo | None:
        """The module whose span (decorators to last body line) contains ``line``."""
        idx = self.get(path)
        if idx is None:
            return None
        for m in idx.modules:
            if m.start_line <= line <= m.end_line:
                return m
        return None

    def kernel_at(self, path: str | Path, line: int) -> KernelInfo | None:
        """The kernel whose name line to closing brace contains ``line``."""
        idx = self.get(path)
        if idx is None:
            return None
        for k in idx.kernels:
            if k.line <= line <= k.end_line:
                return k
        return None

    def modules(self) -> list[tuple[str, ModuleInfo]]:
        with self._lock:
            items = sorted(self._files.items())
        return [(p, m) for p, idx in items for m in idx.modules]

    def kernels(self) -> list[tuple[str, KernelInfo]]:
        with self._lock:
            items = sorted(self._files.items())
        return [(p, k) for p, idx in items for k in idx.kernels]

    # -- writing ---------------------------------------------------------------------------------

    def scan(self) -> None:
        """(Re)index every .py/.cu/.cuh file under the root, reading ``pyproject.toml`` first."""
        pyproject = read_pyproject_forge(self.root)
        with self._lock:
            self._pyproject = pyproject
            self._generation += 1
            generation = self._generation
        found: dict[str, FileIndex] = {}
        for path in self._walk():
            found[path] = self._index_disk(path, pyproject)
        with self._lock:
            for path in self._open:  # the editor's text wins over the disk's
                if path in self._files:
                    found[path] = self._files[path]
            self._files = found
            open_items = list(self._open.items()) if generation == self._generation else []
        for path, (text, version) in open_items:  # their inputs may come from the pyproject just read
            self._store(path, lambda pp, p=path, t=text, v=version: self._index_text(p, t, v, pp), expect_text=text)

    def update(self, path: str | Path, text: str, version: int | None = None) -> FileIndex:
        """Index the editor's text of ``path`` (didOpen/didChange); returns the (stored) index.

        An update carrying an older version than the stored one, or than the editor's latest text
        (which another thread may still be indexing), is ignored (the stored index is returned).
        Files other than .py/.cu/.cuh are not stored; the root pyproject.toml is re-read.
        """
        key = _norm(path)
        if key == self._pyproject_path:
            self._set_pyproject(parse_pyproject_forge(text, self.root, path=key))
            pp = self.pyproject
            return empty_index(key, text, version, notes=[n for n in [pp.error, *pp.warnings] if n])
        if not is_indexed_path(key):
            return empty_index(key, text, version)
        with self._lock:
            current = self._files.get(key)
            pending = self._open.get(key)  # the editor's latest text, which another thread may be indexing now
            known = [
                v for v in (current.version if current else None, pending[1] if pending else None) if v is not None
            ]
            if version is not None and known and version < max(known):
                return current if current is not None else empty_index(key, text, version)
            self._open[key] = (text, version)
            if current is not None and current.content_hash == content_hash(text) and not current.skipped:
                fresh = current.model_copy(update={"version": version})
                self._files[key] = fresh
                return fresh
        return self._store(key, lambda pp: self._index_text(key, text, version, pp), expect_text=text)

    def refresh(self, path: str | Path) -> FileIndex | None:
        """Re-read ``path`` from disk (file watcher, didClose); drops it when it no longer exists."""
        key = _norm(path)
        with self._lock:
            self._open.pop(key, None)
        if key == self._pyproject_path:
            self._set_pyproject(read_pyproject_forge(self.root))
            return None
        if not is_indexed_path(key) or not os.path.isfile(key):
            self.remove(key)
            return None
        return self._store(key, lambda pp: self._index_disk(key, pp))

    def remove(self, path: str | Path) -> None:
        key = _norm(path)
        with self._lock:
            self._files.pop(key, None)
            self._open.pop(key, None)
        if key == self._pyproject_path:
            self._set_pyproject(PyProjectForge(root=self.root))

    # -- internals -------------------------------------------------------------------------------

    def _index_text(self, key: str, text: str, version: int | None, pp: PyProjectForge) -> FileIndex:
        if len(text) > self.max_file_bytes or (
            len(text) * 4 > self.max_file_bytes and len(text.encode("utf-8", "surrogatepass")) > self.max_file_bytes
        ):
            return empty_index(
                key, text, version, skipped=f"larger than the index limit of {self.max_file_bytes} bytes"
            )
        return index_file(key, text, pyproject=pp, version=version)

    def _index_disk(self, path: str, pp: PyProjectForge) -> FileIndex:
        text, skipped, notes = read_source(path, self.max_file_bytes)
        if text is None:
            return FileIndex(path=path, skipped=skipped)
        idx = index_file(path, text, pyproject=pp)
        if notes:
            idx.notes = notes + idx.notes
        return idx

    def _store(self, key: str, make, *, expect_text: str | None = None) -> FileIndex:
        """Run ``make(pyproject)`` outside the lock, then store its result.

        Retried when the pyproject changed meanwhile. With ``expect_text`` (editor text), the result is
        stored only while that text is still the editor's latest for ``key``.
        """
        idx: FileIndex | None = None
        for _ in range(5):
            with self._lock:
                pp, generation = self._pyproject, self._generation
            idx = make(pp)
            with self._lock:
                if generation != self._generation:
                    continue
                if expect_text is not None:
                    current = self._open.get(key)
                    if current is None or current[0] is not expect_text:
                        return self._files.get(key, idx)
                self._files[key] = idx
                return idx
        assert idx is not None
        return idx

    def _set_pyproject(self, pp: PyProjectForge) -> None:
        with self._lock:
            old = self._pyproject
            self._pyproject = pp
            self._generation += 1
            if [e.model_dump() for e in old.modules] == [e.model_dump() for e in pp.modules]:
                return
            affected = {_norm(os.path.join(self.root, e.file)) for e in [*old.modules, *pp.modules]}
            affected &= set(self._files) | set(self._open)
            opened = {k: self._open[k] for k in affected if k in self._open}
        for key in sorted(affected):
            if key in opened:
                text, version = opened[key]
                self._store(key, lambda p, k=key, t=text, v=version: self._index_text(k, t, v, p), expect_text=text)
            elif os.path.isfile(key):
                self._store(key, lambda p, k=key: self._index_disk(k, p))

    def _walk(self) -> Iterator[str]:
        suffixes = PYTHON_SUFFIXES + CUDA_SUFFIXES
        stack = [self.root]
        while stack:
            folder = stack.pop()
            try:
                with os.scandir(folder) as it:
                    entries = list(it)
            except OSError:
                continue
            if folder != self.root and any(e.name == "pyvenv.cfg" for e in entries):
                continue  # a virtualenv, whatever its name
            subdirs = []
            for e in entries:
                name = e.name
                try:
                    if e.is_dir(follow_symlinks=False):
                        if name not in SKIP_DIRS and not name.startswith("."):
                            subdirs.append(e.path)
                    elif name.lower().endswith(suffixes) and e.is_file():
                        yield _norm(e.path)
                except OSError:
                    continue
            stack.extend(sorted(subdirs, reverse=True))
