"""C++/CUDA source text, read without a compiler: top-level pieces, includes, torch names. Pure text (no torch): the
load_inline header tiers (`loading.py`) and the device/host split (`cudasplit.py`) share it."""

from __future__ import annotations

import re
from pathlib import Path

#: Umbrella headers that cost nvcc tens of seconds each; `slim_cuda_sources` replaces them.
_UMBRELLAS = (
    "torch/extension.h",
    "torch/types.h",
    "torch/torch.h",
    "torch/all.h",
    "ATen/ATen.h",
    "ATen/cuda/CUDAContext.h",
)
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"][^\n]*$', re.MULTILINE)
_OP_CALL = re.compile(r"\b(?:torch|at)::(\w+)\s*\(")
_TORCH_ONLY_API = re.compile(r"\btorch::(?:nn|optim|data|jit|autograd|serialize|cuda)\b|PYBIND11|\bpy::")
_CUDA_RUNTIME_API = re.compile(
    r"\b(?:getCurrentCUDAStream|getDefaultCUDAStream|CUDAStream|CUDAGuard|"
    r"OptionalCUDAGuard|CUDAStreamGuard|getStreamFromPool)\b"
)


def _torch_namespace_block(include_dir: Path) -> str:
    """The body of torch/types.h's ``namespace torch {...}`` (dtype aliases), without its includes."""
    text = (include_dir / "torch" / "csrc" / "api" / "include" / "torch" / "types.h").read_text()
    start = text.index("namespace torch {")
    end = text.index("} // namespace torch", start) + len("} // namespace torch")
    return text[start:end]


_TORCH_HEADER = re.compile(r"^(?:ATen|c10|torch|caffe2|pybind11)/")
_TORCH_NAME = re.compile(r"\b(?:torch|at|c10)::|\b(?:TORCH|AT|C10)_[A-Z_]+\b")
# Device code generated from host code: template kernels instantiated by their launches, extended
# lambdas, thrust/cub algorithms. Such sources keep all code visible to the device pass.
_DEVICE_FROM_HOST = re.compile(r"__device__|__global__|__host__|\bthrust::|\bcub::")
_TEMPLATE_KERNEL = re.compile(
    r"\btemplate\s*<[^{;]*>\s*(?:__launch_bounds__\s*\([^)]*\)\s*)?"
    r"(?:static\s+|inline\s+)*__global__"
)
_BLANK = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL)


def _top_level_chunks(src: str) -> list[str]:
    """Split C++/CUDA source into top-level pieces: preprocessor lines, and declarations or
    definitions ending at a `;` or closing `}` at brace depth 0. Joined, they give back `src`."""
    code = _BLANK.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), src)  # same offsets, no comments/strings
    chunks, start, depth, i, n = [], 0, 0, 0, len(code)
    while i < n:
        ch = code[i]
        if depth == 0 and ch == "#" and code[code.rfind("\n", 0, i) + 1 : i].strip() == "":
            if code[start:i].strip():
                chunks.append(src[start:i])
                start = i
            while True:  # the directive with its continuation lines
                end = code.find("\n", i)
                end = n if end < 0 else end + 1
                if not code[i:end].rstrip().endswith("\\"):
                    break
                i = end
            chunks.append(src[start:end])
            start = i = end
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                end = code.find("\n", i)
                end = n if end < 0 else end + 1
                chunks.append(src[start:end])
                start = i = end
                continue
        elif ch == ";" and depth == 0:
            end = code.find("\n", i)
            end = n if end < 0 else end + 1
            chunks.append(src[start:end])
            start = i = end
            continue
        i += 1
    if start < n:
        chunks.append(src[start:])
    return chunks
