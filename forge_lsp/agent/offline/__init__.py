"""Offline candidates: what `forge optimize` evaluates without an LLM (and the LLM's seeds).

    from forge_lsp.agent.offline import offline_candidates
    for cand in offline_candidates(load_task("model.py"), device="cuda"):
        print(cand.name, cand.summary)          # then Candidate.from_source(cand.source, cand.name)

Two kinds:

- ``torch.compile:<mode>``: ``ModelNew`` subclasses the task's model and compiles the parent
  forward on the first call. Modes "default", "max-autotune-no-cudagraphs" and
  "reduce-overhead" (CUDA graphs; its outputs are cloned, since graph replays reuse output
  memory) on CUDA; only "default" on the CPU. Offered even when the model cannot be traced.
- ``library:<op>``: hand-written Triton kernels for ops found in the model's FX graph, one
  candidate per op family plus ``library:all`` when several families matched. ``ModelNew``
  subclasses the model, re-traces its forward with torch.fx in ``__init__``, rewrites the
  matched nodes into library calls and runs the generated code against the live module, so
  the state_dict keys are exactly the reference's.

The caller never imports the task module or torch: the graph comes from a child process
(`probe.py`, run with the engine's scrubbed worker environment, its own process group and a
timeout), matching is pure Python (`match.py`), sources are assembled from text
(`generate.py`, kernels in `library/`).

What each kernel assumes (checked before every launch; otherwise the wrapper calls the torch
op it replaced through `_forge_fallback`, an explicit precondition test, never a try/except).
Common to all: the tensors on one CUDA device (or the CPU with TRITON_INTERPRET=1), one dtype
among fp32, fp16, bf16 (parameters too: mixed dtypes fall back), contiguous, non-empty, and
no autograd (grad disabled or nothing requiring grad: the kernels have no backward). Math in
fp32, output in the input dtype. Indexing is int64 per row/segment base, int32 within one.
Launch choices read the SM count (4 under the interpreter).

- softmax (torch.softmax, F.softmax, Tensor.softmax, nn.Softmax): dim is the last dim (a
  non-negative dim must be rank-1 by the probe's shapes); no dtype argument. Rows up to 16384
  elements sit in registers (BLOCK = next power of 2, short rows packed several per program,
  num_warps from the tile size): one read, one write. Longer rows: online softmax (running max
  and rescaled sum per lane, then a normalize pass: two reads, one write), one program per
  row when there are at least 2 x SMs rows, else each row split across programs whose
  (max, sum) partials are merged by the writing kernel.
- layer_norm (F.layer_norm, torch.layer_norm, nn.LayerNorm, with or without weight/bias):
  normalized_shape equals the input's trailing dims (flattened into one row); weight and bias
  of that shape. Rows up to 8192 in registers with exact two-pass statistics. Longer rows use
  the segment kernels of `seg_norm.py`: one Welford pass (per-lane states, one reciprocal per
  chunk) and one normalize pass, split across programs when there are fewer than 4 x SMs rows.
- rms_norm (F.rms_norm, torch.rms_norm, nn.RMSNorm, and the written-out
  ``x * rsqrt(mean(x^2, -1, keepdim=True) + eps) [* weight]`` whose intermediates have no
  other users): as layer_norm (long rows: mean(x^2) = M2/n + mean^2 from the Welford pass);
  eps None means torch.finfo(dtype).eps.
- group_norm (F.group_norm, torch.group_norm, nn.GroupNorm, affine or not): input (N, C, *)
  contiguous (NCHW, not channels_last), C divisible by num_groups; each (n, group) is one
  contiguous segment for the segment kernels (per-channel scale/shift as scalars when planes
  are at least half a block, else a flat walk with L1-cached gathers); segments are split
  across programs when there are fewer than 4 x SMs of them.
- adaptive_avg_pool2d (F.adaptive_avg_pool2d, nn.AdaptiveAvgPool2d): input (N, C, H, W) or
  (C, H, W) contiguous; output size of positive ints (None entries fall back), at most 65535
  output cells. (1, 1) is a plane-mean reduction with several planes per program; other sizes
  a windowed kernel (program per block of planes x output cell; correct, not tuned).
- linear_act (nn.Linear or F.linear followed by relu/gelu (exact or tanh)/silu, the linear's
  output used only by the activation): ``torch.matmul(x, W.T)`` (cuBLAS, any x layout), then
  one Triton kernel adding the bias and applying the activation in place on the fresh output.
  Bias of shape (out_features,), same dtype. Not a fused-epilogue GEMM: the bias+activation
  pass still reads and writes the output once.
- bias_act (``x + p`` or ``torch.add(x, p)`` with p a parameter/buffer, followed by
  relu/gelu/silu, the sum used only by the activation): p has exactly one non-1 dim, which
  broadcasts along the same-size dim of x without growing x: the last dim ((C,) bias) or an
  inner dim ((C, 1, 1) bias on NCHW); same dtype as x; x contiguous.
"""

from __future__ import annotations

import threading
from pathlib import Path

from pydantic import BaseModel

from ...engine.task import Task
from .generate import COMPILE_MODES, SUMMARIES, compile_source, library_source
from .match import FAMILIES, Match, disjoint, match_graph
from .probe import ProbeNode, ProbeReport, probe_task, probe_tasks

__all__ = [
    "OfflineCandidate",
    "offline_candidates",
    "candidates_for",
    "probe_task",
    "probe_tasks",
    "match_graph",
    "ProbeReport",
    "ProbeNode",
    "Match",
    "COMPILE_MODES",
]


class OfflineCandidate(BaseModel):
    name: str  # e.g. "library:softmax" or "torch.compile:max-autotune"
    origin: str  # "library" | "torch.compile"
    summary: str  # one line
    source: str  # complete candidate source defining ModelNew
    ops: list[str] = []  # library ops it replaces


def _is_cuda(device: str) -> bool:
    return device == "cuda" or device.startswith("cuda:")


def compile_candidates(
    task: Task, device: str = "cuda", modes: tuple[str, ...] | list[str] | None = None
) -> list[OfflineCandidate]:
    if modes is None:
        modes = COMPILE_MODES if _is_cuda(device) else ("default",)
    elif not _is_cuda(device):
        modes = [m for m in modes if m == "default"]
    return [
        OfflineCandidate(
            name=f"torch.compile:{mode}",
            origin="torch.compile",
            summary=f"the reference forward compiled by torch.compile(mode={mode!r})"
            + (", outputs cloned after each CUDA graph replay" if mode == "reduce-overhead" else ""),
            source=compile_source(task, mode),
        )
        for mode in modes
    ]


def _ops(matches: list[Match]) -> list[str]:
    out: list[str] = []
    for m in matches:
        out += [o for o in m.ops if o not in out]
    return out


def library_candidates(task: Task, report: ProbeReport) -> list[OfflineCandidate]:
    matches = match_graph(report)
    out = []
    for family in FAMILIES:
        group = disjoint([m for m in matches if m.family == family])
        if group:
            out.append(
                OfflineCandidate(
                    name=f"library:{family}",
                    origin="library",
                    summary=SUMMARIES[family],
                    source=library_source(task, group),
                    ops=_ops(group),
                )
            )
    if len(out) > 1:
        combined = disjoint(matches)
        fams = []
        for m in combined:
            if m.family not in fams:
                fams.append(m.family)
        out.append(
            OfflineCandidate(
                name="library:all",
                origin="library",
                summary="all library kernels that apply: " + ", ".join(fams),
                source=library_source(task, combined),
                ops=_ops(combined),
            )
        )
    return out


def candidates_for(
    task: Task, report: ProbeReport, device: str = "cuda", modes: tuple[str, ...] | list[str] | None = None
) -> list[OfflineCandidate]:
    """Offline candidates from an existing probe report (library ones first)."""
    return library_candidates(task, report) + compile_candidates(task, device, modes)


def offline_candidates(
    task: Task,
    *,
    device: str = "cuda",
    python: str | None = None,
    timeout: float = 120.0,
    cache_dir: Path | None = None,
    cancel: threading.Event | None = None,
    modes: tuple[str, ...] | list[str] | None = None,
    library: bool | None = None,
) -> list[OfflineCandidate]:
    """Library candidates for the ops found in the task's FX graph, then torch.compile variants.

    The graph is traced in a child process (`probe_task`); when that fails (untraceable model,
    broken task, timeout, `cancel` set) only the torch.compile variants are offered. Never imports
    the task. `library` (default: on a GPU only): the Triton library candidates too. On the CPU they run
    under Triton's interpreter, hundreds of times slower than the reference: they can be checked for
    correctness there, never win, so the default leaves them (and the graph probe) out.
    """
    if library is None:
        library = not device.startswith("cpu")
    if not library:
        return compile_candidates(task, device, modes)
    report = probe_task(task, device=device, python=python, timeout=timeout, cache_dir=cache_dir, cancel=cancel)
    return candidates_for(task, report, device, modes)
