"""What a rewrite or a revert gives back: the edit (`Rewrite`), or `RewriteError` saying why not."""

from __future__ import annotations

from pydantic import BaseModel


class RewriteError(ValueError):
    """The rewrite cannot be made; the message says why and what to do."""


class Rewrite(BaseModel):
    """The edit: ``replacement`` replaces lines [start_line, end_line) of the old text."""

    new_text: str
    start_line: int
    end_line: int
    replacement: str
    summary: str
    class_name: str = ""
    reference_class: str = ""
    optimized_class: str = ""
    renamed: dict[str, str] = {}
    dropped: list[str] = []
