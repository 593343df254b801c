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
_CUDA_SOURCES = re.compile(r"cuda_sources\s*=(?!\s*(?:None\b|\[\s*\]|\(\s*\)|\"\"|''))")  # not an empty one


def detect_backend(source: str) -> Backend:
    """Guess the kernel backend from the source text (used for reports and compile routing)."""
    if _NVRTC.search(source):
        return Backend.nvrtc
    if _LOAD_INLINE.search(source):
        return Backend.cuda_inline if _CUDA_SOURCES.search(source) else Backend.cpp_inline
    if _TRITON.search(source):
        return Backend.triton
    return Backend.torch


#: Backends whose kernels run only on an NVIDIA GPU, and why (Triton also runs on the CPU, interpreted).
_GPU_ONLY = {
    Backend.cuda_inline: "it builds CUDA sources with load_inline (cuda_sources=), which needs nvcc and a CUDA build of torch",
    Backend.nvrtc: "it compiles and launches CUDA kernels through forge_lsp.runtime.cuda (NVRTC)",
}


def gpu_requirement(backend: Backend, device: str, *, triton_interpreter: bool = True) -> str | None:
    """Why a candidate of `backend` cannot run on `device` because it needs an NVIDIA GPU, or None when it can.

    On the CPU, CUDA candidates (load_inline with cuda_sources, NVRTC) cannot run at all; a Triton candidate
    runs only under Triton's interpreter (``TRITON_INTERPRET=1``, which forge's CPU workers set)."""
    if device.split(":")[0] != "cpu":
        return None
    why = _GPU_ONLY.get(backend)
    if why is None and backend is Backend.triton and not triton_interpreter:
        why = "its Triton kernels need a GPU unless Triton's interpreter runs them (TRITON_INTERPRET=1)"
    if why is None:
        return None
    return f"this candidate needs an NVIDIA GPU: {why}; the device is {device} (evaluate it with --device cuda)"


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
