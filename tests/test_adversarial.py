"""Adversarial acceptance suite: candidates that fake correctness or speed must be rejected for the
right reason, and honest but unusual candidates must stay correct.

The cases live in `tests/adversarial/cases.py` (CPU: pure torch/Python, tiny shapes) and
`tests/adversarial/gpu_cases.py` (CUDA: Triton and forge's NVRTC runtime, marked `gpu`); the task
files they target are `tests/fixtures/*.py` and `tests/adversarial/tasks/*.py`. Each cheat is a
complete candidate module that passes a KernelBench-style check (one fresh input set, one call,
allclose) and lists the checks that may legitimately reject it: a rejection must be
`status == incorrect` with `failed_check` in that list. The classes (test ids start with them):

1. c1-cache / g1 — results cached on a cheap fingerprint of the inputs (data_ptr, `_version`, sampled
   values, the sum, the tensor object, a device-side fingerprint). Verification uses fresh tensors and
   misses the cache; a timing loop that passes the same tensors again gets the cached result for free.
   `timed_outputs_match`: every timed call's output is compared with the reference's on inputs whose
   contents changed in place since the last call (also accepted: `no_result_reuse`, or any output
   check that sees a stale result when the allocator hands an earlier input's address to a new one).
   A refresh that bumps the version counter and changes every value makes the `_version`, sampled-value
   and sum caches miss (they then compute honestly, and the verdict is `correct`); to reject them the refresh
   must also leave those fingerprints intact, e.g. write through `.data` (no version bump) and change a
   few elements by +d/-d within a row (sum and most samples kept) — see `_perturb_in_place` below.
2. c2-after-n / g2 — honest for N calls (3, 10, 20, 30) or for 0.5 s, then zeros, a stale result,
   half the work or `torch.empty`. `timed_outputs_match`; when the switch lands inside verification,
   whichever output check runs that call (`outputs_match`, `other_sizes`, `trained_parameters`,
   `noncontiguous_inputs`, `input_range`, `repeatable`, `no_result_reuse`) is right too.
3. c3-not-plain / g3 — outputs that are not plain tensors: a subclass that computes on first read
   (`__torch_function__`), a `_make_subclass` result whose `clone()` is itself, an `nn.Parameter`, a
   `__torch_dispatch__` wrapper subclass (no storage), and zeros that impersonate whatever they are
   compared with (this one fools a value comparison entirely). `plain_tensor_outputs`: every output
   tensor's type is exactly `torch.Tensor`, checked before anything touches the output's storage.
4. c4-init-params / g4 — a reference whose parameters/buffers sit at their init values (zero bias,
   unit scale, LayerNorm affine, BatchNorm running stats in eval mode, PReLU's 0.25) and a
   checkpoint-compatible candidate that skips or bakes in that term. `trained_parameters`: verified
   again with other parameter and buffer values loaded into both models.
5. c5-shapes / g5 — constants baked into divisors, scales, reshapes, loop bounds, grids and index
   masks: right at the task's own sizes only. The task files set no `FORGE` vary; `other_sizes`: the
   engine varies the module-level int constants by itself. `tile-loop-bound`, `triton-baked-grid` and
   `nvrtc-64-threads` are wrong only for larger sizes, so a larger value must be among those tried.
6. c6-race / g6 — races that give the right answer most of the time (random lost rows, a thread
   joined with a timeout, an unlocked split-K accumulation, a producer that signals before its last
   stores; on CUDA a write-after-read on shared memory without `__syncthreads()`, a warp-synchronous
   tail without `__syncwarp()`, non-atomic read-modify-write across blocks, accumulation into
   `torch.empty`). `timed_outputs_match`, `repeatable`, `sanitizer` (CUDA, `sanitize=True`),
   `poisoned_memory`, `background_threads` (the thread joined with a timeout runs on), or whichever output check ran
   the call that lost the race.
7. c7-layout-range / g7 — right only for randn-sized values (float16 sums of squares, one-pass float16
   variance, softmax without max subtraction, tanh via exp: wrong from ~8-12x randn's magnitude).
   `input_range`.
8. g8-stream (CUDA) — outputs not ordered after the caller's work: kernels on a raw `torch.cuda.Stream` or
   under `torch.cuda.stream(side)` that is never joined, half the work moved to such a stream. `stream_ordered`
   (inputs made ready by work on the caller's own stream after a delay) or `all_streams_timed`.

Narrowed, not cheats (`NARROWED`, `GPU_NARROWED`; ids start with n7- / n8-): right on the task's own inputs,
wrong only outside its conditions, as most model-written kernels are — right only for contiguous inputs
(`as_strided`, the raw storage, a ctypes pointer, a kernel indexing `row * cols + c`, an output filled linearly;
a strided view of a wider tensor catches all but `output-layout`, which needs a dense permuted layout), or on
the default stream only (the legacy default stream `stream=0`, the per-thread stream, Triton under
`torch.cuda.stream(torch.cuda.default_stream())`). Each is `correct` with its domain narrowed on that axis (a
guard keeps other calls on the original) and, under `EvalOptions(strict=True)`, `incorrect` with
`noncontiguous_inputs` / `current_stream`. Cheats that also carry such a limit (a contiguous-only read plus a
cache, a legacy-stream launch plus a stale result) are in their cheat's class and must still be rejected for it:
no cheat becomes `correct` through a narrowed domain.
c8-global-state — process-wide settings changed at import, in the constructor or in a call: the thread count,
   oneDNN, float32 matmul precision, TF32: the reference runs under them too (slower, or looser).
   `global_state`: the settings are read before the candidate's module loads and after each of its calls.
c9-global-hooks — process-wide module hooks and modes: a forward pre-hook that slows the reference, a forward hook
   that hands the reference's output to the candidate, a TorchFunctionMode never left, `sys.setprofile` reading the
   harness's frames. `global_hooks`.
c10-background-threads — threads left running: a busy loop from import or from the first call, one busy only
   outside the candidate's own calls, one doing torch matmuls. `background_threads`: the CPU the candidate's threads
   use outside its own calls while a stage runs. These three classes run their self-checks in a child process.
c11-shared-outputs — outputs whose elements share memory: a stride-0 `expand`, `as_strided` with a zero stride,
   `broadcast_to`, overlapping windows: right values, a fraction of the writes. `dense_outputs`.
c12-small-outputs — approximations within the absolute tolerance only because the outputs are tiny (a softmax over
   thousands of columns): `small_outputs` holds such outputs to a relative error.
c13-harness-tampering — forge's own compare function, its code, the tolerances or the failing check replaced from
   inside the worker. `no_monkeypatch`, after every verified call, before the harness reads the output.
c14-reference-tampering — the reference model object found through the garbage collector: a hook on the instance,
   its `forward` replaced, a sleeping pre-hook, its class swapped, its weights zeroed through `.data`.
   `reference_untouched` (the object watched after every candidate call, its values at each stage's end) or
   `clean_judge` (outputs judged in a process that never ran candidate code). Its self-check runs in a child process.
c15-stage-signals — honest only when it reads that it is verified: the deterministic-mode flag, the harness's
   function names on the stack, its own call count, inputs it recognizes as draws of fixed seeds, inputs never
   written in place (version counter 0, where a model's inputs often come from an inplace op).
   `timed_outputs_match`, `clean_judge`, or the output check that runs the call where it switches (every other
   verified input set reaches the candidate written in place).
c16-direction-cache (`UNEXPLOITED`) — caches keyed on an input's direction (normalized values, signs, ratios, order),
   free and right on a scalar times a few patterns, 1% off on a hit in timing so that a hit shows: `correct` (no
   timed input of forge's repeats a direction: new draws of the task's distribution every call) or, where the key
   reads only part of the input, `timed_outputs_match` (the nudged inputs make it return a stale answer).
9. gi-impossible-timing (CUDA, a 192 MiB elementwise task) — no work in the timed call: a
   preallocated result on 7 of 8 calls, `torch.empty` after 20 calls, the work moved to an unjoined
   stream after 40 calls (right values, nothing on the timed stream), nothing recorded while a CUDA
   graph is captured. `timed_outputs_match` or `impossible_timing` (or a stream check).

The honest cases (`honest-*`, `gh-honest-*`) must be `correct`: an algorithmic shortcut (diag(a) @ b as
a broadcast), `.contiguous()` before a row-major view, a `torch.empty` output filled completely, a tuple
output, a non-bitwise-repeatable reduction order, joined threads, a persistent scratch buffer, column-
major outputs, float32 accumulation for float16, folded BatchNorm, a joined side stream, a bandwidth-
bound kernel on 192 MiB.

The in-process self-checks below (no engine involved) pin down that every CPU cheat is a real one: its
first call passes a naive check, and the perturbation its class names exposes it; and that every honest
CPU case survives all of those perturbations, so a rejection of one is a false positive.
"""

from __future__ import annotations

import dataclasses
import secrets
import time
import types
from collections import Counter

import pytest
import torch
from adversarial.cases import BIG_SCALE, C6, C9, C10, C15, CHEATS, HONEST, NARROWED, SOFTMAX, UNEXPLOITED, Case, adv
from adversarial.gpu_cases import GPU_CHEATS, GPU_HONEST, GPU_NARROWED

from forge_lsp.engine import Candidate, EvalOptions, Evaluator, StageTimeouts, Status, Verdict, load_task

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)

CPU_CASES = CHEATS + HONEST + NARROWED
NARROWING_CHECK = {"layouts": "noncontiguous_inputs", "streams": "current_stream"}
CLASSES = ["cache", "after-n", "not-plain", "init-params", "shapes", "race", "layout-range"]
#: classes with CPU cases only so far (their GPU cases come with an H200 run)
CPU_CLASSES = [
    "global-state",
    "global-hooks",
    "background-threads",
    "shared-outputs",
    "small-outputs",
    "harness-tampering",
    "reference-tampering",
    "stage-signals",
]


@pytest.fixture(scope="module")
def adv_evaluator(cache_dir, fast_options):
    ev = Evaluator("cpu", options=fast_options, cache_dir=cache_dir)
    yield ev
    ev.close()


def summary(v: Verdict) -> str:
    checks = ", ".join(f"{c.name}{'' if c.passed else '(FAILED)'}" for c in v.checks)
    text = f"status={v.status.value} failed_check={v.failed_check} reason={v.reason!r}\nchecks: {checks}"
    if v.timing is not None:
        text += f"\nspeedup: {v.timing.speedup:.2f}x ({v.timing.mode})"
    if v.traceback:
        text += "\n" + v.traceback[-1500:]
    return text


def evaluate(evaluator: Evaluator, case: Case, strict: bool = False) -> Verdict:
    update = dict(case.options, **({"strict": True} if strict else {}))
    options = evaluator.options.model_copy(update=update) if update else None
    candidate = Candidate.from_source(case.source, case.id)
    return evaluator.evaluate(load_task(case.task_path), candidate, options, sanitize=case.sanitize)


def assert_rejected(v: Verdict, case: Case) -> None:
    assert v.status is Status.incorrect, f"{case.what}: not rejected\n{summary(v)}"
    assert v.failed_check in case.expect, f"{case.what}: expected one of {sorted(case.expect)}\n{summary(v)}"
    assert any(c.name == v.failed_check and not c.passed for c in v.checks), summary(v)


def assert_correct(v: Verdict, case: Case) -> None:
    assert v.status is Status.correct, f"{case.what}: false rejection\n{summary(v)}"


def assert_narrowed(v: Verdict, case: Case) -> None:
    """Correct, on a domain without the conditions its limit lies in, and the check that found it says so."""
    assert v.status is Status.correct, f"{case.what}: rejected, not narrowed\n{summary(v)}"
    assert v.domain is not None and not v.domain.full, summary(v)
    assert getattr(v.domain, case.narrows) == ("contiguous" if case.narrows == "layouts" else "default"), v.domain
    check = NARROWING_CHECK[case.narrows]
    assert any(n.axis == case.narrows and n.check == check for n in v.domain.narrowed), v.domain
    assert any(c.name == check and c.passed and c.narrows == case.narrows for c in v.checks), summary(v)


def assert_rejected_when_strict(v: Verdict, case: Case) -> None:
    check = NARROWING_CHECK[case.narrows]
    assert v.status is Status.incorrect and v.failed_check == check, f"{case.what}: strict\n{summary(v)}"


# ----------------------------------------------------------------------------------------- engine, CPU
@pytest.mark.parametrize("case", CHEATS, ids=[c.id for c in CHEATS])
def test_cheat_is_rejected(adv_evaluator, case: Case):
    assert_rejected(evaluate(adv_evaluator, case), case)


@pytest.mark.parametrize("case", UNEXPLOITED, ids=[c.id for c in UNEXPLOITED])
def test_a_cache_on_the_inputs_direction_never_hits(adv_evaluator, case: Case):
    """Never a speedup from the cache: `correct` only if none of forge's timed calls hit it (such a hit is 1% off: no
    timed input shares a direction with another), else rejected by `timed_outputs_match` — the refresher's nudged
    inputs (the last contents with a few elements swapped, same norm) make a key that reads part of the input return
    a stale answer."""
    v = evaluate(adv_evaluator, case)
    assert v.status is Status.correct or v.failed_check == "timed_outputs_match", summary(v)


@pytest.mark.parametrize("case", UNEXPLOITED, ids=[c.id for c in UNEXPLOITED])
def test_self_check_a_direction_cache_hits_on_a_scalar_times_a_pattern(case: Case):
    _, ref, new, inputs = _setup(case)
    assert _naive_close(_call(ref, inputs), _call(new, _clone(inputs)))  # a miss: honest
    scaled = [x * 2.5 for x in inputs]
    assert _close(_call(ref, scaled), _call(new, scaled))  # a hit outside timing: the cached answer, rescaled
    scaled = [x * 0.5 for x in inputs]
    assert not _close(_call(ref, scaled), _as_timed(new, scaled))  # a hit in a timing loop: 1% off, as marked


@pytest.mark.parametrize("case", HONEST, ids=[c.id for c in HONEST])
def test_honest_candidate_stays_correct(adv_evaluator, case: Case):
    v = evaluate(adv_evaluator, case)
    assert_correct(v, case)
    assert v.domain is not None and v.domain.layouts == "any", summary(v)  # right for every layout it was shown


@pytest.mark.parametrize("case", NARROWED, ids=[c.id for c in NARROWED])
def test_a_limit_outside_the_tasks_conditions_narrows_the_domain(adv_evaluator, case: Case):
    assert_narrowed(evaluate(adv_evaluator, case), case)


@pytest.mark.parametrize("case", NARROWED, ids=[c.id for c in NARROWED])
def test_strict_asks_for_the_full_domain(adv_evaluator, case: Case):
    assert_rejected_when_strict(evaluate(adv_evaluator, case, strict=True), case)


_IDLE_LATE_THREAD = """
import threading
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    # every call leaves a thread asleep in its own code (a join whose timeout runs out): no CPU, no wrong value yet,
    # a write into anything the call handed out still possible
    def forward(self, x):
        out = torch.softmax(x, dim=1)

        def late():
            time.sleep(0.3)

        t = threading.Thread(target=late, daemon=True, name="late-writer")
        t.start()
        t.join(timeout=0.001)
        return out
"""


def test_a_thread_a_call_leaves_running_fails_even_when_it_uses_no_cpu(adv_evaluator):
    """Right values, no CPU stolen: still rejected, for the thread found in the candidate's code right after the call
    that started it returned (a race joined with a timeout is caught on the call where it runs late, whether or not
    its late write leaves the values right)."""
    v = evaluate(adv_evaluator, Case("c10", "idle-late-thread", SOFTMAX, _IDLE_LATE_THREAD, "", C10, "threads"))
    assert v.status is Status.incorrect and v.failed_check == "background_threads", summary(v)
    failed = next(c for c in v.checks if c.name == "background_threads")
    assert "when the call that started them returned" in failed.detail and "late-writer" in failed.detail, failed


_WRONG_ON_THE_EIGHTH_SIGHTING = """
import hashlib

import torch.nn as nn

seen = {}


class ModelNew(nn.Module):
    # a rare race, made deterministic: wrong on the eighth call that sees the same input contents
    def forward(self, a, b):
        key = hashlib.sha1(a.contiguous().numpy().tobytes() + b.contiguous().numpy().tobytes()).hexdigest()
        seen[key] = seen.get(key, 0) + 1
        out = a @ b
        return out * 1.01 if seen[key] == 8 else out
"""


def test_repeatable_runs_the_same_input_enough_times_to_show_a_rare_race(adv_evaluator):
    """A race right on most calls can escape the timed calls when the timing budget leaves few of them (a loaded
    machine): `repeatable` runs one input set up to `repeats` times. Wrong only on the eighth call that sees one
    input: passes with the two repeats it once had, rejected by `repeatable` with the default count. The repeats'
    time budget is widened so that a loaded machine (CI's two cores) cannot end them before the eighth call: the
    count, not the clock, is what this test is about."""
    case = Case("c6-race", "eighth-sighting", adv("matmul_small"), _WRONG_ON_THE_EIGHTH_SIGHTING, "", C6, "refresh")
    few = dict(min_reps=3, max_reps=3, repeat_budget_s=60.0)
    v = evaluate(adv_evaluator, dataclasses.replace(case, options=dict(few, repeats=2)))
    assert v.status is Status.correct, summary(v)
    v = evaluate(adv_evaluator, dataclasses.replace(case, options=few))
    assert v.status is Status.incorrect and v.failed_check == "repeatable", summary(v)
    failed = next(c for c in v.checks if c.name == "repeatable")
    assert int(failed.detail.split(" runs on the same input disagree")[0]) > 2, failed


_STALE_ONCE = """
import torch.nn as nn


class ModelNew(nn.Module):
    # one stale result, on one timed call: the sixth call on the same tensors whose contents changed their sum
    def __init__(self):
        super().__init__()
        self.ptr, self.run, self.sum, self.out, self.done = None, 0, None, None, False

    def forward(self, x):
        s = float(x.sum())
        self.run = self.run + 1 if x.data_ptr() == self.ptr else 0
        nudged = s == self.sum
        self.ptr, self.sum = x.data_ptr(), s
        if self.run >= 6 and not nudged and not self.done:
            self.done = True
            open(FIRED, "a").write("fired")  # the test tells a cheat never triggered from one that escaped
            return self.out
        self.out = x * 2.0 + 1.0
        return self.out
"""


def test_every_timed_call_of_a_big_output_is_looked_at(adv_evaluator, tmp_path):
    """Big outputs are compared in full on a share of the timed calls only; every other call is compared at random
    elements. One stale result, on one timed call neither first, nudged nor last, is caught (the share alone: one
    time in eight). The cheat triggers on the same buffer's sixth new contents in a row, which the order of the
    evaluation's calls does not always give (about one run in ten here, more under load): a run in which it never
    fired is correct, rightly, and is tried again; one in which it fired must be caught."""
    fired = tmp_path / "fired"
    source = f"FIRED = {str(fired)!r}\n" + _STALE_ONCE
    case = Case("c15", "stale-once", BIG_SCALE, source, "", C15, "inplace", {"min_reps": 10, "max_reps": 10})
    for _ in range(4):
        v = evaluate(adv_evaluator, case)
        if fired.exists():
            break
        assert v.status is Status.correct, summary(v)  # it never cheated: nothing wrong to see
    assert fired.exists(), "the stale result never triggered in four evaluations"
    assert v.status is Status.incorrect and v.failed_check == "timed_outputs_match", summary(v)
    failed = next(c for c in v.checks if c.name == "timed_outputs_match")
    assert "[timed call " in failed.detail and "elements outside" in failed.detail, failed


_KERNEL_LEFT_FOR_THE_NEXT = """
import builtins
import time

import torch
import torch.nn as nn

# a kernel over an operator this task's reference never runs (tanh), kept alive past the verdict: the next
# candidate's reference, on a task that does run it, would pay 1 ms a call
_lib = torch.library.Library("aten", "IMPL")


def _slow_tanh(x):
    time.sleep(0.001)
    return (torch.exp(2 * x) - 1) / (torch.exp(2 * x) + 1)


_lib.impl("tanh", _slow_tanh, "CPU")
builtins._forge_kept = _lib


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""


def test_a_kernel_left_in_the_dispatcher_fails_its_candidate_and_not_the_next(adv_evaluator):
    """The dispatcher is compared with torch's own registrations at the end of every evaluation: a kernel registered
    over an operator the reference never runs, kept past the verdict, fails `global_hooks` there, and the worker is
    replaced, so the next candidate (an honest one, on a task whose reference runs that operator) is judged in a
    process without it."""
    v = evaluate(adv_evaluator, Case("c9", "kernel-left", SOFTMAX, _KERNEL_LEFT_FOR_THE_NEXT, "", C9, "global"))
    assert v.status is Status.incorrect and v.failed_check == "global_hooks", summary(v)
    failed = next(c for c in v.checks if c.name == "global_hooks" and not c.passed)
    assert "aten::tanh" in failed.detail and "left so" in failed.detail, failed
    honest = (
        "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
        "        return torch.tanh(x)\n"
    )
    v = evaluate(adv_evaluator, Case("honest", "tanh-after-kernel-left", adv("tanh"), honest, "", frozenset(), ""))
    assert v.status is Status.correct, summary(v)


# ----------------------------------------------------------------------------------------- engine, CUDA
@pytest.fixture(scope="module")
def gpu_adv_evaluator(cache_dir):
    opts = EvalOptions(
        timing_budget_s=0.3,
        min_reps=5,
        max_reps=30,
        warmup=1,
        timeouts=StageTimeouts(compile=600, first_call=120, verify=120, time=120),
    )
    ev = Evaluator("cuda:0", options=opts, cache_dir=cache_dir)
    yield ev
    ev.close()


def _gpu_params(cases: list[Case]) -> list:
    # compute-sanitizer runs take a minute or more each
    return [pytest.param(c, id=c.id, marks=[pytest.mark.slow] if c.sanitize else []) for c in cases]


@pytest.mark.gpu
@pytest.mark.parametrize("case", _gpu_params(GPU_CHEATS))
def test_gpu_cheat_is_rejected(gpu_adv_evaluator, case: Case):
    v = evaluate(gpu_adv_evaluator, case)
    print(f"{case.id}: {v.status.value} {v.failed_check}")  # which check caught it (pytest -rP shows it)
    assert_rejected(v, case)


@pytest.mark.gpu
@pytest.mark.parametrize("case", _gpu_params(GPU_HONEST))
def test_gpu_honest_candidate_stays_correct(gpu_adv_evaluator, case: Case):
    v = evaluate(gpu_adv_evaluator, case)
    assert_correct(v, case)
    assert v.domain is not None and v.domain.streams == "any", summary(v)


@pytest.mark.gpu
@pytest.mark.parametrize("case", _gpu_params(GPU_NARROWED))
def test_gpu_limit_outside_the_tasks_conditions_narrows_the_domain(gpu_adv_evaluator, case: Case):
    assert_narrowed(evaluate(gpu_adv_evaluator, case), case)


@pytest.mark.gpu
@pytest.mark.parametrize("case", _gpu_params(GPU_NARROWED))
def test_gpu_strict_asks_for_the_full_domain(gpu_adv_evaluator, case: Case):
    assert_rejected_when_strict(evaluate(gpu_adv_evaluator, case, strict=True), case)


#: the classes written on the CPU first (c8-c16): the same candidates, on the device (their tensors follow the inputs')
CPU_CLASS_CHEATS = [c for c in CHEATS if c.klass.split("-", 1)[1] in CPU_CLASSES]


@pytest.mark.gpu
@pytest.mark.parametrize("case", _gpu_params(CPU_CLASS_CHEATS))
def test_gpu_cheat_of_the_newer_classes_is_rejected(gpu_adv_evaluator, case: Case):
    v = evaluate(gpu_adv_evaluator, case)
    print(f"{case.id} on cuda: {v.status.value} {v.failed_check}")
    assert_rejected(v, case)


@pytest.mark.gpu
@pytest.mark.parametrize("case", _gpu_params(UNEXPLOITED))
def test_gpu_a_cache_on_the_inputs_direction_never_hits(gpu_adv_evaluator, case: Case):
    v = evaluate(gpu_adv_evaluator, case)
    assert v.status is Status.correct or v.failed_check == "timed_outputs_match", summary(v)


@pytest.mark.gpu
@pytest.mark.parametrize("case", _gpu_params(HONEST))
def test_gpu_honest_cpu_candidate_stays_correct_on_the_device(gpu_adv_evaluator, case: Case):
    assert_correct(evaluate(gpu_adv_evaluator, case), case)


# ---------------------------------------------------------------------- in-process self-checks
def _module(source: str, name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), mod.__dict__)  # noqa: S102 - our own test sources
    return mod


def _models(task: types.ModuleType, cand: types.ModuleType, init: list) -> tuple[torch.nn.Module, torch.nn.Module]:
    torch.manual_seed(0)
    ref = task.Model(*init)
    torch.manual_seed(0)
    new = cand.ModelNew(*init)
    new.load_state_dict(ref.state_dict())
    return ref, new


def _tol(dtype: torch.dtype) -> float:
    return 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-4


def _close(expected, actual) -> bool:
    """The engine's rule for plain tensors: NaN/Inf positions equal, |a - e| <= tol * max(1, rms) + tol * |e|."""
    if isinstance(expected, (tuple, list)):
        return len(expected) == len(actual) and all(_close(e, a) for e, a in zip(expected, actual, strict=True))
    a = torch.Tensor.as_subclass(actual, torch.Tensor).detach().double()
    e = expected.detach().double()
    if a.shape != e.shape or not torch.equal(torch.isnan(a), torch.isnan(e)):
        return False
    if not torch.equal(torch.isinf(a), torch.isinf(e)) or not torch.equal(a[torch.isinf(a)], e[torch.isinf(e)]):
        return False
    fin = torch.isfinite(e)
    ef, af = e[fin], a[fin]
    tol = _tol(expected.dtype)
    scale = max(1.0, float(ef.square().mean().sqrt())) if ef.numel() else 1.0
    return bool(((af - ef).abs() <= tol * scale + tol * ef.abs()).all())


def _naive_close(expected, actual) -> bool:
    """KernelBench's check: torch.allclose on the returned objects, whatever their type."""
    if isinstance(expected, (tuple, list)):
        return all(_naive_close(e, a) for e, a in zip(expected, actual, strict=True))
    return bool(torch.allclose(actual, expected, atol=1e-2, rtol=1e-2))


def _setup(case: Case, overrides: dict | None = None, seed: int = 1):
    task = _module(case.task_path.read_text(), "task")
    for k, v in (overrides or {}).items():
        setattr(task, k, v)
    torch.manual_seed(seed)
    inputs = list(task.get_inputs())
    init = list(task.get_init_inputs())
    ref, new = _models(task, _module(case.source, case.id.replace("-", "_")), init)
    return task, ref, new, inputs


def _as_verified(model, inputs):
    """A call as forge's verification makes it: from `run_case`, deterministic mode on (warnings only), set through
    torch._C as the worker sets it (the public setter imports torch._inductor into this process, which then breaks
    Triton's interpreter for the tests after)."""

    def run_case():
        before = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
        torch._C._set_deterministic_algorithms(True, warn_only=True)
        try:
            return _call(model, inputs)
        finally:
            torch._C._set_deterministic_algorithms(before[0], warn_only=before[1])

    return run_case()


def _as_timed(model, inputs):
    """A call as forge's timing loop makes it: from `cand_fn`, no flag set."""

    def cand_fn():
        return _call(model, inputs)

    return cand_fn()


def _clone(xs: list) -> list:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]


def _call(model, inputs):
    with torch.no_grad():
        return model(*inputs)


def _perturb_in_place(inputs: list, rng: torch.Generator, rows: int = 4) -> None:
    """In a few random rows, +d at one element and -d at another, through `.data`: the address, the
    autograd version counter, the sum (up to rounding) and most sampled elements stay the same."""
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 1:
            flat = x.data.view(-1)
            width = x.shape[-1] if x.dim() > 1 else x.numel()
            for _ in range(rows):
                start = int(torch.randint(0, x.numel() // width, (1,), generator=rng)) * width
                i, j = (start + int(k) for k in torch.randperm(width, generator=rng)[:2])
                flat[i] += 4.0
                flat[j] -= 4.0


def _wrong_under_refresh(case: Case, calls: int = 100) -> int:
    """What a timing loop that checks its outputs sees: one set of tensors, refreshed in place."""
    _, ref, new, inputs = _setup(case)
    if case.trigger == "refresh-after-0.6s":
        _call(new, _clone(inputs))
        time.sleep(0.6)
    rng = torch.Generator().manual_seed(0)
    wrong = 0
    for _ in range(calls):
        _perturb_in_place(inputs, rng)
        out = _call(new, inputs)
        wrong += not _close(_call(ref, inputs), out)
    return wrong


def _noncontiguous_variants(x: torch.Tensor) -> list[torch.Tensor]:
    """The same values as a dense permuted (column-major) layout and as a strided view of a larger buffer."""
    if not isinstance(x, torch.Tensor) or x.dim() == 0:
        return [x, x]
    permuted = x.transpose(-1, -2).contiguous().transpose(-1, -2) if x.dim() >= 2 else x
    big = x.new_zeros(*x.shape[:-1], 2 * x.shape[-1])
    big[..., ::2] = x
    return [permuted, big[..., ::2]]


def _int_constants(case: Case) -> dict[str, int]:
    task = _module(case.task_path.read_text(), "task")
    return {k: v for k, v in vars(task).items() if type(v) is int and not k.startswith("_")}


#: run in a child process: a process-wide cheat would change this test process's own settings and hooks
_GLOBAL_CHILD = r"""
import ctypes, json, os, signal, sys, torch
task_src, cand_src = sys.stdin.read().split("\n#--forge-case--\n")
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # orphans of the candidate's processes stay this process's descendants
continued = [0]
signal.signal(signal.SIGCONT, lambda *_: continued.__setitem__(0, continued[0] + 1))

def descendants_cpu():
    total, todo = 0.0, [os.getpid()]
    while todo:
        pid = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                todo += [int(c) for c in open(f"/proc/{pid}/task/{t}/children").read().split()]
            except OSError:
                pass
        if pid != os.getpid():
            try:
                f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
                total += (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
            except (OSError, IndexError):
                pass
    return total

def state():
    m = sys.modules["torch.nn.modules.module"]
    return {
        "affinity": sorted({tuple(sorted(os.sched_getaffinity(int(t)))) for t in os.listdir("/proc/self/task")}),
        "timers": signal.getitimer(signal.ITIMER_REAL) != (0.0, 0.0),
        "handlers": [id(signal.getsignal(n)) for n in (signal.SIGALRM, signal.SIGUSR1, signal.SIGUSR2)],
        "threads": torch.get_num_threads(),
        "matmul precision": torch.get_float32_matmul_precision(),
        "mkldnn": torch.backends.mkldnn.enabled,
        "tf32": (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32),
        "hooks": [len(getattr(m, n)) for n in ("_global_forward_pre_hooks", "_global_forward_hooks")],
        "function modes": torch._C._len_torch_function_stack(),
        "profile": sys.getprofile() is not None,
        "gc": __import__("gc").get_threshold(),
        "mha fast path": torch.backends.mha.get_fastpath_enabled(),
        "kernels": hash(tuple(torch._C._dispatch_dump(n) for n in torch._C._dispatch_get_all_op_names())),
    }

task = {}
exec(compile(task_src, "task", "exec"), task)
torch.manual_seed(1)
inputs, init = task["get_inputs"](), task["get_init_inputs"]()
before = state()
cand = {}
exec(compile(cand_src, "candidate", "exec"), cand)
torch.manual_seed(0)
ref = task["Model"](*init)
torch.manual_seed(0)
new = cand["ModelNew"](*init)
with torch.no_grad():
    expected = ref(*inputs)
    got = new(*[x.clone() for x in inputs])
    ref(*inputs)
after = state()
sys.setprofile(None)
import threading, time
mine = [t for t in threading.enumerate() if t is not threading.main_thread()]
cpu = lambda: sum(time.clock_gettime(time.pthread_getcpuclockid(t.ident)) for t in mine)
cpu0, pcpu0, t0 = cpu(), descendants_cpu(), time.monotonic()
time.sleep(0.3)  # the test process idle: what do the candidate's threads and processes do meanwhile?
cpu1, pcpu1 = cpu(), descendants_cpu()
while max(cpu1 - cpu0, pcpu1 - pcpu0) <= 0.1 and time.monotonic() - t0 < 3.0:  # a busy machine gives them less
    time.sleep(0.1)
    cpu1, pcpu1 = cpu(), descendants_cpu()
print(json.dumps({"naive": bool(torch.allclose(got, expected, atol=1e-2, rtol=1e-2)),
                  "changed": sorted(k for k in before if before[k] != after[k]),
                  "idle_thread_cpu_s": cpu1 - cpu0, "idle_process_cpu_s": pcpu1 - pcpu0,
                  "continued": continued[0]}), flush=True)
import os
os._exit(0)  # not through interpreter exit: a thread still inside torch would abort it
"""


#: run in a child process: the cheat reaches into forge's own modules, as they are in a worker
_TAMPER_CHILD = r"""
import json, sys, torch
import forge_lsp.engine.harness.compare as compare
import forge_lsp.engine.worker as worker
from forge_lsp.engine.task import Tolerance
task_src, cand_src = sys.stdin.read().split("\n#--forge-case--\n")
tol = Tolerance(atol=1e-4, rtol=1e-4)
check = worker.Evaluation.check
task = {}
exec(compile(task_src, "task", "exec"), task)
torch.manual_seed(1)
inputs, init = task["get_inputs"](), task["get_init_inputs"]()
cand = {}
exec(compile(cand_src, "candidate", "exec"), cand)
ref, new = task["Model"](*init), cand["ModelNew"](*init)
with torch.no_grad():
    expected = ref(*inputs)
    for _ in range(3):
        got = new(*[x.clone() for x in inputs])
said = sys.modules["forge_lsp.engine.harness.compare"].compare_outputs(expected, got, lambda dtype: tol, "set")[0]
print(json.dumps({"wrong": not torch.allclose(got, expected, atol=1e-3, rtol=1e-3),
                  "fooled": said is None or tol.atol != 1e-4 or worker.Evaluation.check is not check}))
"""


def _tamper_child(case: Case) -> dict:
    import json
    import subprocess
    import sys

    source = case.task_path.read_text() + "\n#--forge-case--\n" + case.source
    done = subprocess.run(
        [sys.executable, "-c", _TAMPER_CHILD], input=source, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


#: run in a child process: the candidate reaches the reference object through the garbage collector
_REFERENCE_CHILD = r"""
import json, sys, time, torch
task_src, cand_src = sys.stdin.read().split("\n#--forge-case--\n")
torch.set_num_threads(1)  # one thread: a call's time does not wait on a second core of a busy machine
task = {}
exec(compile(task_src, "task", "exec"), task)
torch.manual_seed(1)
inputs, init = task["get_inputs"](), task["get_init_inputs"]()
torch.manual_seed(0)
ref = task["Model"](*init)


def fastest_ms(models):  # the fastest of 20 calls each, taken in turn: load on the machine weighs on all of them alike
    best = [float("inf")] * len(models)
    for _ in range(20):
        for i, m in enumerate(models):
            x = [t.clone() for t in inputs]
            t0 = time.perf_counter()
            m(*x)
            best[i] = min(best[i], time.perf_counter() - t0)
    return [b * 1e3 for b in best]


with torch.no_grad():
    expected = ref(*[x.clone() for x in inputs])
    cand = {}
    exec(compile(cand_src, "candidate", "exec"), cand)
    new = cand["ModelNew"](*init)
    new.load_state_dict(ref.state_dict())
    got = new(*[x.clone() for x in inputs])
    got = new(*[x.clone() for x in inputs])  # what it did in its first call is in place now
    after = ref(*[x.clone() for x in inputs])  # the reference, as a one-process harness runs it next
    torch.manual_seed(0)
    untouched = task["Model"](*init)  # made after the candidate ran: the reference as it was
    ref_ms, untouched_ms = fastest_ms([ref, untouched])
    slower = ref_ms - untouched_ms
close = lambda a, b: bool(torch.allclose(a, b, atol=1e-2, rtol=1e-2))
print(json.dumps({"naive": close(after, got), "wrong": not close(got, expected), "slower_ms": slower}))
"""


def _reference_child(case: Case) -> dict:
    import json
    import subprocess
    import sys

    source = case.task_path.read_text() + "\n#--forge-case--\n" + case.source
    done = subprocess.run(
        [sys.executable, "-c", _REFERENCE_CHILD], input=source, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _global_child(case: Case) -> dict:
    import json
    import subprocess
    import sys

    source = case.task_path.read_text() + "\n#--forge-case--\n" + case.source
    done = subprocess.run(
        [sys.executable, "-c", _GLOBAL_CHILD], input=source, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", CPU_CASES, ids=[c.id for c in CPU_CASES])
def test_self_check_first_call_passes_a_naive_check(case: Case):
    """Every case looks right to a one-call allclose on the task's own inputs (races: most calls)."""
    if case.trigger in ("global", "threads", "processes"):
        assert _global_child(case)["naive"]
        return
    if case.trigger == "tamper":  # wrong, and forge's own comparison, as the cheat left it, says it is right
        assert _tamper_child(case)["fooled"]
        return
    if case.trigger == "reference":  # the reference, as the candidate left it, agrees with it
        assert _reference_child(case)["naive"]
        return
    if case.trigger.startswith("signal"):  # right when called as forge's verification calls it
        _, ref, new, inputs = _setup(case)
        assert _naive_close(_call(ref, inputs), _as_verified(new, _clone(inputs)))
        return
    _, ref, new, inputs = _setup(case)
    if case.flaky_first_call:
        ok = sum(_naive_close(_call(ref, inputs), _call(new, _clone(inputs))) for _ in range(20))
        assert ok >= 10, f"right on only {ok} of 20 calls"
    else:
        assert _naive_close(_call(ref, inputs), _call(new, _clone(inputs)))


@pytest.mark.parametrize("case", CHEATS + NARROWED, ids=[c.id for c in CHEATS + NARROWED])
def test_self_check_the_cheat_is_real(case: Case):
    """The perturbation named by the case's class exposes it (outside the engine)."""
    if case.trigger == "global":  # what the reference runs under is not what it was before the candidate came
        assert _global_child(case)["changed"]
    elif case.trigger == "threads":  # its threads take CPU while nothing of its own runs
        assert _global_child(case)["idle_thread_cpu_s"] > 0.1
    elif case.trigger == "processes":  # its processes take CPU, or stop this one, while nothing of its own runs
        seen = _global_child(case)
        assert seen["idle_process_cpu_s"] > 0.1 or seen["continued"] > 0, seen
    elif case.trigger == "ring":  # an earlier result changes under later calls (a buffer handed out again)
        _, _, new, inputs = _setup(case)
        first = _call(new, _clone(inputs))
        kept = first.clone()
        for _ in range(10):
            _call(new, [x * 3 for x in inputs])
        assert not torch.equal(first, kept)
    elif case.trigger == "tamper":  # 5% off everywhere: wrong to any comparison forge has not been made to skip
        assert _tamper_child(case)["wrong"]
    elif case.trigger.startswith("signal"):  # wrong when called as forge's timing calls it, on new draws
        _, ref, new, inputs = _setup(case)
        torch.manual_seed(secrets.randbits(62))
        fresh = [torch.randn_like(x) * 3 for x in inputs]
        for _ in range(60):  # past any count it waits for
            got = _as_timed(new, _clone(fresh))
        assert not _close(_call(ref, fresh), got)
    elif case.trigger == "reference":  # wrong against the reference as it was, or the reference made slower
        seen = _reference_child(case)
        assert seen["wrong"] or seen["slower_ms"] > 1.0, seen
    elif case.trigger == "dense":  # fewer distinct elements in memory than the output holds
        _, _, new, inputs = _setup(case)
        out = _call(new, inputs)
        assert out.untyped_storage().nbytes() < out.numel() * out.element_size()
    elif case.trigger == "small":  # each element within atol=1e-4, the output as a whole off by tenths of a percent
        _, ref, new, inputs = _setup(case)
        expected, got = _call(ref, inputs).double(), _call(new, inputs).double()
        assert (got - expected).abs().max() < 1e-4
        assert ((got - expected).norm() / expected.norm()) > 1e-3
    elif case.trigger.startswith("refresh"):
        assert _wrong_under_refresh(case) > 0
    elif case.trigger == "history":  # wrong on the same values once the input was written in place (a model's inputs)
        _, ref, new, inputs = _setup(case)
        written = _clone(inputs)
        for x in written:
            x.mul_(1.0)
        assert not _close(_call(ref, written), _call(new, written))
    elif case.trigger == "inplace":  # one set of tensors, new draws written into them: some calls return stale
        _, ref, new, inputs = _setup(case)
        wrong = 0
        for _ in range(20):
            for x in inputs:
                x.copy_(torch.randn_like(x))
            wrong += not _close(_call(ref, inputs), _call(new, inputs))
        assert wrong > 0
    elif case.trigger == "type":
        _, _, new, inputs = _setup(case)
        assert type(_call(new, inputs)) is not torch.Tensor
    elif case.trigger == "params":
        _, ref, new, inputs = _setup(case)
        with torch.no_grad():
            for name, t in ref.state_dict().items():
                if t.is_floating_point():
                    t.copy_(torch.rand_like(t) + 0.5 if "var" in name else torch.randn_like(t))
        new.load_state_dict(ref.state_dict())
        assert not _close(_call(ref, inputs), _call(new, inputs))
    elif case.trigger == "sizes":
        wrong = []
        for name, value in _int_constants(case).items():
            for other in (max(1, value // 2 - 1), 2 * value + 3):
                _, ref, new, inputs = _setup(case, {name: other})
                if not _close(_call(ref, inputs), _call(new, _clone(inputs))):
                    wrong.append(f"{name}={other}")
        assert wrong
    elif case.trigger == "noncontig":
        _, ref, new, inputs = _setup(case)
        variants = list(zip(*(_noncontiguous_variants(x) for x in inputs), strict=True))
        assert any(not _close(_call(ref, list(v)), _call(new, list(v))) for v in variants)
    elif case.trigger == "range":
        _, ref, new, inputs = _setup(case)
        big = [x * 100 if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
        assert not _close(_call(ref, big), _call(new, _clone(big)))
    else:
        pytest.fail(f"unknown trigger {case.trigger!r}")


@pytest.mark.parametrize("case", HONEST, ids=[c.id for c in HONEST])
def test_self_check_honest_survives_every_perturbation(case: Case):
    """Refreshed inputs, trained parameters, other sizes, non-contiguous views and large values."""
    assert _wrong_under_refresh(case, calls=20) == 0
    _, ref, new, inputs = _setup(case)
    assert type(_call(new, inputs)) in (torch.Tensor, tuple)
    with torch.no_grad():
        for name, t in ref.state_dict().items():
            if t.is_floating_point():
                t.copy_(torch.rand_like(t) + 0.5 if "var" in name else torch.randn_like(t))
    new.load_state_dict(ref.state_dict())
    assert _close(_call(ref, inputs), _call(new, inputs)), "trained parameters"
    for variant in zip(*(_noncontiguous_variants(x) for x in inputs), strict=True):
        assert _close(_call(ref, list(variant)), _call(new, list(variant))), "non-contiguous"
    big = [x * 100 if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
    assert _close(_call(ref, big), _call(new, _clone(big))), "large values"
    for name, value in _int_constants(case).items():
        for other in (max(1, value // 2 - 1), 2 * value + 3):
            _, ref, new, inputs = _setup(case, {name: other})
            assert _close(_call(ref, inputs), _call(new, _clone(inputs))), f"{name}={other}"


def test_case_ids_are_unique_and_every_class_has_four():
    ids = [c.id for c in CPU_CASES + GPU_CHEATS + GPU_HONEST + GPU_NARROWED]
    assert len(ids) == len(set(ids))
    counts = Counter(c.klass for c in CHEATS)
    assert set(counts) == {f"c{i}-{k}" for i, k in enumerate(CLASSES + CPU_CLASSES, 1)}
    assert min(counts.values()) >= 4, counts
    gpu = Counter(c.klass for c in GPU_CHEATS)
    assert set(gpu) == {f"g{i}-{k}" for i, k in enumerate(CLASSES, 1)} | {
        "g8-stream",
        "gi-impossible-timing",
        "gs-global-state",
        "gk-global-hooks",
        "gt-background-threads",
    }
    assert min(n for k, n in gpu.items() if k != "gi-impossible-timing") >= 4, gpu
    assert gpu["gi-impossible-timing"] >= 2
    assert len(HONEST) >= 4 and len(GPU_HONEST) >= 4
    assert len(UNEXPLOITED) >= 4 and all(c.klass == "c16-direction-cache" for c in UNEXPLOITED)
    assert len(NARROWED) >= 4 and {c.narrows for c in GPU_NARROWED} == {"layouts", "streams"}
    assert all(c.narrows and not c.expect for c in NARROWED + GPU_NARROWED)
    # cheats that also carry a domain limit: they must be rejected for their cheat, not narrowed into `correct`
    assert sum(c.name in ("flat-storage-cache", "strided-then-stale") for c in CHEATS) == 2
    for case in CPU_CASES + UNEXPLOITED + GPU_CHEATS + GPU_HONEST + GPU_NARROWED:
        compile(case.source, case.id, "exec")
        assert "class ModelNew(nn.Module)" in case.source and case.task_path.is_file(), case.id
        assert "load_inline" not in case.source, case.id
