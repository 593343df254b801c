"""Candidate implementations: a Python source defining ``ModelNew``, and its kernel backend."""

from __future__ import annotations

import hashlib
import re
from enum import Enum
from pathlib import Path

from pydantic import BaseModel


class Backend(str, Enum):
    triton = "triton"
    nvrtc = "nvrtc"
    cuda_inline = "cuda_inline"
    cpp_inline = "cpp_inline"
    torch = "torch"


_TRITON = re.compile(r"@\s*triton\.jit|@\s*jit\b.*\n\s*def|from\s+triton\b|import\s+triton\b")
_NVRTC = re.compile(r"forge_lsp\.runtime|compile_kernel\s*\(")
_LOAD_INLINE = re.compile(r"\bload_inline\s*\(")
_CUDA_SOURCES = re.compile(r"cuda_sources\s*=")


def detect_backend(source: str) -> Backend:
    """Guess the kernel backend from the source text (used for reports and compile routing)."""
    if _NVRTC.search(source):
        return Backend.nvrtc
    if _LOAD_INLINE.search(source):
        return Backend.cuda_inline if _CUDA_SOURCES.search(source) else Backend.cpp_inline
    if _TRITON.search(source):
        return Backend.triton
    return Backend.torch


class Candidate(BaseModel):
    """A candidate implementation. Its source is never executed in the calling process."""

    name: str
    source: str
    path: Path | None = None
    class_name: str = "ModelNew"
    backend: Backend = Backend.torch

    @property
    def sha(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    @classmethod
    def from_source(cls, source: str, name: str = "candidate", path: Path | None = None) -> Candidate:
        return cls(name=name, source=source, path=path, backend=detect_backend(source))


def load_candidate(path: str | Path) -> Candidate:
    path = Path(path).resolve()
    source = path.read_text(encoding="utf-8", errors="replace")
    return Candidate.from_source(source, name=path.stem, path=path)
