"""What the workspace index holds per file: `FileIndex` with its modules (`ModuleInfo`, where their
example inputs come from: `InputsSource`) and kernels (`KernelInfo`); positions as described in
`forge_lsp.workspace.index`."""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, Field


class InputsSource(BaseModel):
    """Where a module's example inputs come from."""

    kind: Literal["kernelbench", "pyproject"]
    detail: str = Field(description="for people, e.g. 'get_inputs() / get_init_inputs() in this file'")
    task_file: str | None = Field(description="the file to hand to the engine as the task")
    model_class: str | None = Field(
        default=None, description="the class in task_file to optimize (load_task's model_class)"
    )


class ModuleInfo(BaseModel):
    """A module-level ``nn.Module`` subclass."""

    name: str
    line: int = Field(description="line of the `class` keyword")
    column: int = Field(description="column of the `class` keyword")
    name_column: int = Field(description="column of the class name on `line`")
    start_line: int = Field(description="first line of the statement, decorators included")
    end_line: int = Field(description="last line of the class body (inclusive)")
    bases: list[str] = Field(description='as written, e.g. ["nn.Module"], ["torch.nn.Module"], ["MyBase"]')
    init_params: list[str] = Field(
        description="constructor parameters without self; '*args' / '**kwargs' keep their stars. Followed "
        "through same-file bases when the class defines no __init__; [] when unknown"
    )
    forward_params: list[str] = Field(default_factory=list, description="forward() parameters without self, same rules")
    has_forward: bool = Field(description="defines forward, or inherits it from a same-file module or a torch.nn layer")
    inputs: InputsSource | None = None


class KernelInfo(BaseModel):
    """A ``__global__`` function in a CUDA file; line/column point at its name."""

    name: str
    line: int
    column: int
    extern_c: bool
    end_line: int = Field(description="last line of its body (inclusive); its own line for a declaration")


class FileIndex(BaseModel):
    path: str
    version: int | None = None
    content_hash: str = ""
    modules: list[ModuleInfo] = []
    kernels: list[KernelInfo] = []
    has_get_inputs: bool = False
    has_get_init_inputs: bool = False
    syntax_error: str | None = Field(default=None, description="first syntax error: 'line N: message' (N 1-based)")
    syntax_error_line: int | None = Field(default=None, description="0-based line of syntax_error")
    skipped: str | None = Field(
        default=None, description="why the file was not indexed (too large, binary, unreadable)"
    )
    notes: list[str] = []


def content_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def empty_index(path: str, text: str, version: int | None, **extra: object) -> FileIndex:
    """An index of `text` with nothing in it (but what `extra` sets: skipped, notes...)."""
    return FileIndex(path=path, version=version, content_hash=content_hash(text), **extra)
