"""The language server's workspace model, read from source text only (no torch, no editor libraries).

`WorkspaceIndex` keeps, per file, the ``nn.Module`` subclasses of ``.py`` files with the source of
their example inputs and the ``__global__`` kernels of ``.cu``/``.cuh`` files; `inputs_skeleton`
writes ``get_inputs()`` / ``get_init_inputs()`` for a module that has none.
"""

from .index import (
    FileIndex,
    ForgeModuleEntry,
    InputsSource,
    KernelInfo,
    ModuleInfo,
    PyProjectForge,
    WorkspaceIndex,
    index_cuda,
    index_file,
    index_python,
    parse_pyproject_forge,
    read_pyproject_forge,
)
from .skeleton import Insertion, apply_insertions, inputs_skeleton, skeleton_edits

__all__ = [
    "FileIndex",
    "ForgeModuleEntry",
    "InputsSource",
    "Insertion",
    "KernelInfo",
    "ModuleInfo",
    "PyProjectForge",
    "WorkspaceIndex",
    "apply_insertions",
    "index_cuda",
    "index_file",
    "index_python",
    "inputs_skeleton",
    "parse_pyproject_forge",
    "read_pyproject_forge",
    "skeleton_edits",
]
