"""Worker process: the only place where task and candidate code is executed.

Started by `forge_lsp.engine.worker_client.Worker` as ``python -m forge_lsp.engine.worker``. It imports
torch once, announces itself (`Hello`), then serves `EvaluateRequest` / `BuildRequest`
messages on its pipes, announcing each stage so the parent can apply per-stage timeouts.
Its stdout/stderr are the parent's log file for it, never the message pipes.

Started with ``--judge`` it is a judge: it serves only `JudgeRequest` / `CompareRequest` (the reference's outputs on
input sets it draws, compared with a candidate's sent as tensors), and never loads candidate code.

Every module of this package runs in the worker process only; the parent's side is `worker_client`. By concern:
`state` (what requests share), `base` → `probes` → `verify` → `timed` → `evaluation` (one evaluation, each layer
building on the one before), `judge`, `memory` (the device's memory given back), `main` (the request loop).
"""

from .evaluation import Evaluation
from .judge import Judge
from .main import main
from .memory import DeviceMemory
from .state import StageFailed, WorkerState, last_level_cache_bytes, physical_floor

__all__ = [
    "DeviceMemory",
    "Evaluation",
    "Judge",
    "StageFailed",
    "WorkerState",
    "last_level_cache_bytes",
    "main",
    "physical_floor",
]
