"""forge's Python parsing from several threads at once (the server's request thread and its jobs' threads):
CPython 3.11's `ast.parse` can raise `SystemError: AST constructor recursion depth mismatch` when a garbage
collection during one thread's parse lets another thread parse (python/cpython#106905); `forge_lsp.parsing.parse`
is the one way forge parses, and is safe there."""

from __future__ import annotations

import gc
import re
import threading
import time
from pathlib import Path

import pytest

from forge_lsp import parsing

ROOT = Path(__file__).resolve().parent.parent
SOURCE = (ROOT / "forge_lsp" / "reintegrate" / "rewrite.py").read_text()


class _Finalized:
    """Garbage with a finalizer that gives the GIL away: what makes another thread run mid-parse."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        time.sleep(0.0001)


@pytest.mark.integration
def test_threads_parsing_while_finalizers_run_get_their_trees():
    errors: list[str] = []
    trees: list[int] = []

    def work() -> None:
        for _ in range(300):
            for _ in range(5):
                _Finalized()
            try:
                trees.append(len(parsing.parse(SOURCE).body))
            except SystemError as exc:
                errors.append(str(exc))
                return

    old = gc.get_threshold()
    gc.set_threshold(20, 1, 1)  # collections during the parses
    try:
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        gc.set_threshold(*old)
    assert not errors, errors
    assert len(trees) == 1200 and len(set(trees)) == 1


def test_forge_parses_python_only_through_the_thread_safe_parse():
    bare = re.compile(r"\bast\.parse\(")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "forge_lsp").rglob("*.py"))
        if path.name != "parsing.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if bare.search(line)
    ]
    assert not found, found
