"""End to end on the CPU: real worker processes, real C++ builds, the real Triton interpreter."""

from __future__ import annotations

import re
import threading
import time

import candidates as C
import pytest
import torch
from conftest import FIXTURES

from forge_lsp.engine import Candidate, EvaluationCancelled, Evaluator, StageTimeouts, Status, load_task
from forge_lsp.engine.local_pool import LocalPool

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)


def ev_cand(evaluator, task, source, name="cand", **opts):
    options = evaluator.options.model_copy(update=opts) if opts else None
    return evaluator.evaluate(task, Candidate.from_source(source, name), options)


# ----------------------------------------------------------------------------- C++ (load_inline)
@pytest.mark.slow
def test_cpp_correct_candidate_is_verified_and_timed(cpu_evaluator, softmax_task):
    v = ev_cand(cpu_evaluator, softmax_task, C.CPP_CORRECT)
    assert v.status is Status.correct, v.reason + v.traceback + v.log_excerpt
    assert v.backend == "cpp_inline"
    names = {c.name for c in v.checks if c.passed}
    assert {
        "outputs_match",
        "inputs_unchanged",
        "no_output_aliasing",
        "no_result_reuse",
        "repeatable",
        "no_monkeypatch",
        "checkpoint_compatible",
    } <= names
    # a passed check never carries a failure's words
    said = {c.name: c.detail for c in v.checks if c.passed}
    assert "changed after later calls" not in said["no_result_reuse"], said
    detail = next(c.detail for c in v.checks if c.name == "outputs_match")
    assert "random#3" in detail and "batch_size=7" in detail  # trials + the varied size
    assert v.timing is not None and v.timing.mode == "cpu" and v.timing.candidate.n >= 5
    lo, hi = v.timing.speedup_ci95
    assert lo <= v.timing.speedup <= hi
    assert {"load_task", "compile", "first_call", "verify", "time"} <= set(v.stages)


@pytest.mark.slow
def test_cpp_cached_build_is_fast(cpu_evaluator, softmax_task):
    ev_cand(cpu_evaluator, softmax_task, C.CPP_CORRECT)  # built (or cached) already
    v = ev_cand(cpu_evaluator, softmax_task, C.CPP_CORRECT, timing=False)
    assert v.status is Status.correct
    assert v.stages["compile"] < 5.0  # a cached extension loads; a rebuild takes ~30 s here


@pytest.mark.slow
def test_cpp_incorrect_candidate_names_the_failed_check(cpu_evaluator, softmax_task):
    v = ev_cand(cpu_evaluator, softmax_task, C.CPP_INCORRECT)
    assert v.status is Status.incorrect
    assert v.failed_check == "outputs_match"
    assert v.mismatch.problem == "values" and v.mismatch.max_abs_error > 1e-4
    assert v.mismatch.index is not None and v.timing is None


@pytest.mark.slow
def test_cpp_compile_error_carries_the_compiler_log(cpu_evaluator, softmax_task):
    v = ev_cand(cpu_evaluator, softmax_task, C.CPP_COMPILE_ERROR)
    assert v.status is Status.compile_error
    assert re.search(r"main\.cpp:5:\d+: error: expected .;. before", v.log_excerpt), v.log_excerpt


@pytest.mark.slow
def test_cpp_crash_is_a_verdict_and_the_worker_comes_back(cpu_evaluator, softmax_task):
    before = cpu_evaluator.worker.restarts
    v = ev_cand(cpu_evaluator, softmax_task, C.CPP_CRASH)
    assert v.status is Status.crashed
    assert "SIGSEGV" in v.reason and "first_call" in v.reason
    retried = bool(v.memory and v.memory.retried)  # a worker that served others first: tried in a fresh one too
    v2 = ev_cand(cpu_evaluator, softmax_task, C.CPP_CORRECT, timing=False)
    assert v2.status is Status.correct
    assert cpu_evaluator.worker.restarts == before + 1 + retried


@pytest.mark.slow
def test_cpp_hang_times_out_per_stage(cpu_evaluator, softmax_task):
    opts = cpu_evaluator.options.model_copy(update={"timeouts": StageTimeouts(compile=300, first_call=3)})
    t0 = time.monotonic()
    v = cpu_evaluator.evaluate(softmax_task, Candidate.from_source(C.CPP_HANG, "hang"), opts)
    assert v.status is Status.timeout and "first_call" in v.reason and "3 s" in v.reason
    assert time.monotonic() - t0 < 60
    assert ev_cand(cpu_evaluator, softmax_task, C.CPP_CORRECT, timing=False).correct


# ----------------------------------------------------------------------------- cheats
CALLS = "CALLS_BEFORE_DRIFT"


@pytest.mark.parametrize(
    "source, task_file, failed_check, words",
    [
        (C.CHEAT_MUTATES_INPUT, "softmax_small.py", "inputs_unchanged", "modified input"),
        (C.CHEAT_RETURNS_INPUT, "relu_nonneg.py", "no_output_aliasing", "share memory with an input"),
        (C.CHEAT_CACHES_RESULT, "softmax_small.py", "no_result_reuse", "same result as for an earlier"),
        (C.CHEAT_SHARED_OUTPUT_BUFFER, "softmax_small.py", "no_result_reuse", "changed after later calls"),
        (C.CHEAT_MONKEYPATCH, "softmax_small.py", "no_monkeypatch", "torch.softmax"),
        (C.CHEAT_NONDETERMINISTIC.replace(CALLS, "5"), "softmax_small.py", "repeatable", "disagree"),
        (C.CHEAT_WRONG_DTYPE, "softmax_small.py", "outputs_match", "dtype torch.float64"),
        (C.CHEAT_FIRST_OUTPUT_ONLY, "two_outputs.py", "outputs_match", "out[1]"),
        (C.CHEAT_SHAPE_SPECIALIZED, "softmax_small.py", "other_sizes", "batch_size=7"),
        (C.TRITON_CHEAT_IN_PLACE, "softmax_small.py", "inputs_unchanged", "modified input"),
    ],
    ids=[
        "mutates-input",
        "returns-input",
        "caches-result",
        "shared-output-buffer",
        "monkeypatch",
        "nondeterministic",
        "wrong-dtype",
        "first-output-only",
        "shape-specialized",
        "triton-in-place",
    ],
)
@pytest.mark.slow
def test_cheats_are_rejected_for_the_right_reason(cpu_evaluator, source, task_file, failed_check, words):
    task = load_task(FIXTURES / task_file)
    v = ev_cand(cpu_evaluator, task, source, timing=False)
    assert v.status is Status.incorrect, v.reason + v.traceback
    assert v.failed_check == failed_check, v.reason
    assert words in v.reason
    assert any(c.name == failed_check and not c.passed for c in v.checks)


@pytest.mark.slow
def test_monkeypatching_candidate_does_not_poison_the_next_evaluation(cpu_evaluator, softmax_task):
    v = ev_cand(cpu_evaluator, softmax_task, C.CHEAT_MONKEYPATCH, timing=False)
    assert v.failed_check == "no_monkeypatch"
    # the patched worker was replaced: an honest candidate is judged by an unpatched reference
    v2 = ev_cand(cpu_evaluator, softmax_task, C.CPP_INCORRECT, timing=False)
    assert v2.failed_check == "outputs_match"


# ----------------------------------------------------------------------------- Triton (interpreter)
def test_triton_correct(cpu_evaluator, softmax_task):
    v = ev_cand(cpu_evaluator, softmax_task, C.TRITON_CORRECT)
    assert v.status is Status.correct, v.reason + v.traceback + v.log_excerpt
    assert v.backend == "triton" and v.timing is not None
    # the verdict says which inputs it covers: 3 random sets of (16, 100) plus batch_size=7 (softmax_small.py)
    shapes = {(s.case, tuple(s.shape)) for s in v.inputs}
    assert shapes == {
        ("random#1", (16, 100)),
        ("random#2", (16, 100)),
        ("random#3", (16, 100)),
        ("batch_size=7", (7, 100)),
    }
    assert {s.dtype for s in v.inputs} == {"float32"} and all(s.contiguous for s in v.inputs)


def test_triton_incorrect(cpu_evaluator, softmax_task):
    v = ev_cand(cpu_evaluator, softmax_task, C.TRITON_INCORRECT, timing=False)
    assert v.status is Status.incorrect and v.failed_check == "outputs_match"


def test_triton_compile_error(cpu_evaluator, softmax_task):
    v = ev_cand(cpu_evaluator, softmax_task, C.TRITON_COMPILE_ERROR, timing=False)
    assert v.status is Status.compile_error
    assert "SyntaxError" in v.reason and "line" in v.traceback


def test_triton_crash(cpu_evaluator, softmax_task):
    v = ev_cand(cpu_evaluator, softmax_task, C.TRITON_CRASH, timing=False)
    assert v.status is Status.crashed and "SIGSEGV" in v.reason


@pytest.mark.slow
def test_triton_hang(cpu_evaluator, softmax_task):
    opts = cpu_evaluator.options.model_copy(update={"timeouts": StageTimeouts(first_call=3)})
    v = cpu_evaluator.evaluate(softmax_task, Candidate.from_source(C.TRITON_HANG, "hang"), opts)
    assert v.status is Status.timeout and "first_call" in v.reason


# ----------------------------------------------------------------------------- verification details
def test_checkpoint_compatibility_and_same_seed_fallback(cpu_evaluator):
    task = load_task(FIXTURES / "linear_task.py")
    same_names = """
import torch, torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.proj = nn.Linear(d_in, d_out)
    def forward(self, x):
        return torch.clamp_min(x @ self.proj.weight.t() + self.proj.bias, 0)
"""
    renamed = """
import torch, torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        lin = nn.Linear(d_in, d_out)          # same RNG draws as the reference, other names
        self.w, self.b = lin.weight, lin.bias
    def forward(self, x):
        return torch.relu(x @ self.w.t() + self.b)
"""
    v = ev_cand(cpu_evaluator, task, same_names, timing=False)
    assert v.correct and v.checkpoint_compatible is True
    v = ev_cand(cpu_evaluator, task, renamed, timing=False)
    assert v.correct and v.checkpoint_compatible is False
    check = next(c for c in v.checks if c.name == "checkpoint_compatible")
    assert "same-seed" in check.detail and "proj.weight" in check.detail


def test_captured_input_sets_are_verified(cpu_evaluator, tmp_path):
    captured = tmp_path / "real_batch.pt"
    torch.save([torch.randn(5, 100) * 10], captured)
    task = load_task(FIXTURES / "softmax_small.py", input_sets=[captured])
    wrong_on_batch_5 = C.TORCH_CORRECT.replace(
        "return torch.softmax(x, dim=1)", "return torch.softmax(x, dim=1) * (1.1 if x.shape[0] == 5 else 1.0)"
    )
    v = ev_cand(cpu_evaluator, task, wrong_on_batch_5, timing=False)
    assert v.failed_check == "outputs_match" and v.mismatch.input_set == "captured:real_batch"
    v = ev_cand(cpu_evaluator, task, C.TORCH_CORRECT, timing=False)
    assert v.correct and "captured:real_batch" in next(c.detail for c in v.checks if c.name == "outputs_match")


# ----------------------------------------------------------------------------- isolation
def test_worker_environment_carries_no_api_keys(monkeypatch, cache_dir, fast_options, softmax_task):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    monkeypatch.setenv("FORGE_ANTHROPIC_TOKEN", "tok")
    leak_check = C.TORCH_CORRECT.replace(
        "class ModelNew",
        """
import os
leaked = [k for k, v in os.environ.items() if "sk-test-secret" in v or k.endswith("_TOKEN")]
if leaked:
    raise RuntimeError(f"secrets visible: {leaked}")

class ModelNew""",
    )
    with Evaluator("cpu", options=fast_options, cache_dir=cache_dir) as ev:
        v = ev.evaluate(softmax_task, Candidate.from_source(leak_check, "leak"))
    assert v.status is Status.correct, v.reason


def test_output_is_captured_and_size_limited(cache_dir, fast_options, softmax_task):
    chatty = C.TORCH_CORRECT.replace("return torch.softmax(x, dim=1)", "while True:\n            print('x' * 4096)")
    opts = fast_options.model_copy(update={"log_limit_bytes": 1 << 20})
    with Evaluator("cpu", options=opts, cache_dir=cache_dir) as ev:
        v = ev.evaluate(softmax_task, Candidate.from_source(chatty, "chatty"))
    assert v.status is Status.runtime_error and "output limit" in v.reason
    assert 0 < len(v.log_excerpt) <= 10_000 and "xxxx" in v.log_excerpt


def test_runtime_error_reports_the_exception(cpu_evaluator, softmax_task):
    bad = C.TORCH_CORRECT.replace("return torch.softmax(x, dim=1)", "return x @ x")
    v = ev_cand(cpu_evaluator, softmax_task, bad, timing=False)
    assert v.status is Status.runtime_error and "RuntimeError" in v.reason
    assert "mat1 and mat2 shapes cannot be multiplied" in v.traceback


@pytest.mark.slow
def test_cancel_kills_the_worker_promptly(cache_dir, fast_options, softmax_task):
    with Evaluator("cpu", options=fast_options, cache_dir=cache_dir) as ev:
        stages: list[str] = []
        result: dict = {}

        def run():
            try:
                ev.evaluate(
                    softmax_task, Candidate.from_source(C.TRITON_HANG, "hang"), on_stage=lambda c, s: stages.append(s)
                )
            except EvaluationCancelled:
                result["cancelled"] = time.monotonic()

        t = threading.Thread(target=run)
        t.start()
        deadline = time.monotonic() + 60
        while "first_call" not in stages and time.monotonic() < deadline:
            time.sleep(0.05)
        pid = ev.worker.proc.pid
        t_cancel = time.monotonic()
        ev.cancel()
        t.join(10)
        assert "cancelled" in result and result["cancelled"] - t_cancel < 2.0
        import os

        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        # and the evaluator still works afterwards
        assert ev.evaluate(softmax_task, Candidate.from_source(C.TORCH_CORRECT, "ok")).correct


@pytest.mark.slow
def test_a_batch_prebuilds_and_reports_compile_errors_without_the_device(cache_dir, fast_options, softmax_task):
    cands = [
        Candidate.from_source(C.CPP_COMPILE_ERROR, "broken"),
        Candidate.from_source(C.CPP_CORRECT, "good"),
        Candidate.from_source(C.TORCH_CORRECT, "torch"),
    ]
    seen = []
    with LocalPool("cpu", options=fast_options, cache_dir=cache_dir, build_workers=1) as pool:
        vs = pool.evaluate_many(softmax_task, cands, on_verdict=lambda c, v: seen.append(c.name))
    assert [v.status for v in vs] == [Status.compile_error, Status.correct, Status.correct], [v.reason for v in vs]
    assert "build" in vs[0].stages and "build" in vs[1].stages and "build" not in vs[2].stages
    assert "verify" not in vs[0].stages  # the build's error answered it: the device never ran it
    assert sorted(seen) == ["broken", "good", "torch"]


KEPT_TASK = """
import torch, torch.nn as nn

rows = 6
cols = 40


class Model(nn.Module):
    def forward(self, x, b):
        return torch.tanh(x) + b


def get_inputs():
    with open({counter!r}, "a") as f:
        f.write("draw\\n")
    return [torch.randn(rows, cols), torch.randn(cols)]


def get_init_inputs():
    return []
"""

REPORTS_ITS_INPUTS = """
import torch, torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x, b):
        with open({seen!r}, "a") as f:
            f.write(f"{{float(x.double().sum()):.9e}} {{float(b.double().sum()):.9e}} {{tuple(x.shape)}}\\n")
        return torch.tanh(x) + b
"""

SCRIBBLES_ON_ITS_INPUTS = """
import torch, torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x, b):
        out = torch.tanh(x) + b
        if not x.is_contiguous():  # only where the inputs are laid out anew: out of sight of the mutation check
            b.data.fill_(7.0)
        return out
"""


def test_a_task_is_drawn_once_and_its_inputs_stay_as_drawn(cache_dir, fast_options, tmp_path):
    """Every candidate of a task is verified on the same inputs, drawn by `get_inputs()` once per worker; a
    candidate that writes into whatever it is handed cannot change what the next one is verified on."""
    counter = tmp_path / "draws.txt"
    task_file = tmp_path / "kept_task.py"
    task_file.write_text(KEPT_TASK.format(counter=str(counter)))
    task = load_task(task_file)
    seen_alone, seen_after = tmp_path / "alone.txt", tmp_path / "after.txt"
    # the judge's own sets are new draws of its own for every judge process (tests/test_judge.py): not these
    fast_options = fast_options.model_copy(update={"judged_sets": 0})
    with Evaluator("cpu", options=fast_options, cache_dir=cache_dir / "fresh") as fresh:
        alone = ev_cand(fresh, task, REPORTS_ITS_INPUTS.format(seen=str(seen_alone)), timing=False)
    assert alone.correct, alone.reason
    draws = counter.read_text().count("draw")
    assert draws >= 3  # the random sets and the varied sizes

    with Evaluator("cpu", options=fast_options, cache_dir=cache_dir / "kept") as ev:
        ev_cand(ev, task, SCRIBBLES_ON_ITS_INPUTS, timing=False)  # (timing draws new inputs for every call)
        after = ev_cand(ev, task, REPORTS_ITS_INPUTS.format(seen=str(seen_after)), timing=False)
    assert after.correct, after.reason
    assert counter.read_text().count("draw") == 2 * draws  # the second evaluator drew once, for the cheat
    seen = seen_alone.read_text().splitlines()
    assert len(seen) >= 3 and seen == seen_after.read_text().splitlines()  # called on the same values throughout


def test_a_worker_keeps_several_tasks_inputs_and_drops_the_least_recently_used_first():
    """A batch moves between tasks as their candidates build: a worker keeps each task's drawn inputs while they fit,
    and to make room drops the task used longest ago, never the one it draws for."""
    from forge_lsp.engine.worker import WorkerState

    state = WorkerState(device=torch.device("cpu"))
    for sha in ("a", "b", "c"):
        state.keep_drawn((sha, 0, ()), [sha], [], 40, limit=100)
    assert {k[0] for k in state.drawn} == {"b", "c"} and state.drawn_bytes == 80  # "a" made room for "c"
    state.use_task("b")  # b's candidate ran: c is now the older
    state.keep_drawn(("d", 0, ()), ["d"], [], 40, limit=100)
    assert {k[0] for k in state.drawn} == {"b", "d"} and state.drawn_bytes == 80
    state.keep_drawn(("d", 1, ()), ["d1"], [], 60, limit=100)  # the task's own other set: b goes, d stays
    assert {k for k in state.drawn} == {("d", 0, ()), ("d", 1, ())} and state.drawn_bytes == 100
    state.keep_drawn(("d", 2, ()), ["d2"], [], 10, limit=100)  # no room without dropping d's own: not kept
    assert ("d", 2, ()) not in state.drawn and state.drawn_bytes == 100


LEAVES_ITS_PROCESS_BROKEN = """
import os, torch, torch.nn as nn
os.environ["FORGE_TEST_BROKEN_BY"] = str(os.getpid())  # stands for a heap the candidate's host code corrupted
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""

ABORTS_IN_A_BROKEN_PROCESS = """
import os, torch, torch.nn as nn
if os.environ.get("FORGE_TEST_BROKEN_BY") == str(os.getpid()):
    os.abort()  # the next allocation on a corrupt heap: glibc aborts, whoever allocates
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""

ALWAYS_ABORTS = """
import os
os.abort()
"""


def test_a_worker_that_dies_after_other_candidates_is_replaced_and_the_candidate_tried_again(
    cpu_evaluator, softmax_task
):
    """A candidate killed by a signal in a worker that ran other candidates before is not blamed for it at once: a
    previous candidate's host code may have corrupted the process. It is evaluated again in a fresh worker, which
    gives its own verdict; one that dies there too is `crashed`."""
    first = ev_cand(cpu_evaluator, softmax_task, LEAVES_ITS_PROCESS_BROKEN, "leaves_broken", timing=False)
    assert first.correct, first.reason
    after = ev_cand(cpu_evaluator, softmax_task, ABORTS_IN_A_BROKEN_PROCESS, "aborts_if_broken", timing=False)
    assert after.correct, after.reason
    assert after.memory is not None and after.memory.retried
    twice = ev_cand(cpu_evaluator, softmax_task, ALWAYS_ABORTS, "always_aborts", timing=False)
    assert twice.status is Status.crashed and twice.reason.endswith("again in a fresh worker"), twice.reason
    # its worker died: the next evaluation starts a fresh one, where a death is the candidate's at once
    once = ev_cand(cpu_evaluator, softmax_task, ALWAYS_ABORTS, "always_aborts", timing=False)
    assert once.status is Status.crashed and "again in a fresh worker" not in once.reason, once.reason
    assert not (once.memory and once.memory.retried)


OUT_OF_MEMORY_IN_ITS_FIRST_PROCESS = """
import os
import torch
import torch.nn as nn

MARK = {mark!r}


class ModelNew(nn.Module):
    def forward(self, x):
        if not os.path.exists(MARK):  # this process is the first to run it: it says the device is full
            open(MARK, "w").close()
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 40.00 GiB.")
        return torch.softmax(x, dim=1)
"""

ALWAYS_OUT_OF_MEMORY = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 40.00 GiB.")
"""


def test_a_candidate_out_of_device_memory_is_tried_once_more_in_a_fresh_worker(cpu_evaluator, softmax_task, tmp_path):
    """Out of memory is not blamed on the candidate at once (the candidates before it may have left the device
    fragmented or held): it is evaluated again in a fresh worker, and `out_of_memory` only if it runs out there too.
    (On a GPU that retry also maps its memory in expandable segments; the GPU memory tests cover that.)"""
    before = cpu_evaluator.worker.restarts
    src = OUT_OF_MEMORY_IN_ITS_FIRST_PROCESS.format(mark=str(tmp_path / "ran-once"))
    v = ev_cand(cpu_evaluator, softmax_task, src, "oom_once", timing=False)
    assert v.status is Status.correct, v.reason
    assert v.memory is not None and v.memory.retried
    assert cpu_evaluator.worker.restarts >= before + 1  # (one more where the test before left its worker to end)
    v = ev_cand(cpu_evaluator, softmax_task, ALWAYS_OUT_OF_MEMORY, "oom_always", timing=False)
    assert v.status is Status.out_of_memory and v.memory is not None and v.memory.retried, v.reason
    assert v.reason.startswith("out of device memory, again in a fresh worker: "), v.reason
    assert "expandable" not in v.reason  # a CPU worker has no device allocator to set


POISONS_THE_TASK_FILE = """
import sys, torch, torch.nn as nn
for mod in list(sys.modules.values()):
    path = getattr(mod, "__file__", None) or ""
    if getattr(mod, "Model", None) is not None and "/modules/" in path:
        text = open(path).read()
        with open(path, "w") as f:  # the reference of every later evaluation that loads this file: zeros
            f.write(text.replace("return torch.softmax(x, dim=1)", "return torch.zeros_like(x)"))
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""

RETURNS_ZEROS = """
import torch, torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
"""


def test_a_rewritten_cached_task_file_is_written_again_from_the_source(cache_dir, fast_options, softmax_task):
    """A candidate that rewrites the cached copy of the task's module (so that later evaluations judge against a
    reference that returns zeros) changes nothing: the file is checked against the source before every load and
    the code run is the source's."""
    with Evaluator("cpu", options=fast_options, cache_dir=cache_dir / "poison") as ev:
        ev_cand(ev, softmax_task, POISONS_THE_TASK_FILE, "poisoner", timing=False)
    files = [f for f in (cache_dir / "poison" / "modules").glob("task_*.py")]
    assert files and any("zeros_like" in f.read_text() for f in files)  # it did rewrite it
    with Evaluator("cpu", options=fast_options, cache_dir=cache_dir / "poison") as fresh:  # a new worker loads the file
        zeros = ev_cand(fresh, softmax_task, RETURNS_ZEROS, "zeros", timing=False)
    assert zeros.status is Status.incorrect and zeros.failed_check == "outputs_match", zeros.reason
    assert not any("zeros_like" in f.read_text() for f in files)


UNWRITTEN_OUTPUT = """
import torch, torch.nn as nn
class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)   # hopes the allocator hands back the reference's result
        out[:, :1] = torch.softmax(x, dim=1)[:, :1]
        return out
"""


def test_unwritten_output_reads_as_nan_whatever_the_allocator_hands_back(cpu_evaluator, softmax_task):
    v = ev_cand(cpu_evaluator, softmax_task, UNWRITTEN_OUTPUT, timing=False)
    assert v.status is Status.incorrect and v.failed_check == "outputs_match"
    assert v.mismatch.problem == "nan" and "NaN positions differ" in v.mismatch.detail


HANGING_INPUTS_TASK = """
import time, torch, torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    with open({counter!r}, "a") as f:
        f.write("draw\\n")
    time.sleep(3600)
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_a_batch_draws_its_inputs_while_sources_build_and_a_hanging_draw_is_said_once(
    cache_dir, fast_options, softmax_task, tmp_path
):
    cands = [Candidate.from_source(C.CPP_CORRECT, "cpp"), Candidate.from_source(C.TORCH_CORRECT, "torch")]
    with LocalPool("cpu", options=fast_options, cache_dir=cache_dir, build_workers=1) as ev:
        vs = ev.evaluate_many(softmax_task, cands)
        assert [v.status for v in vs] == [Status.correct, Status.correct]

        counter = tmp_path / "draws.txt"
        task_file = tmp_path / "hangs.py"
        task_file.write_text(HANGING_INPUTS_TASK.format(counter=str(counter)))
        hangs = load_task(task_file)
        short = fast_options.model_copy(update={"timeouts": StageTimeouts(load_task=3, compile=300)})
        vs = ev.evaluate_many(hangs, cands, short)
        assert [v.status for v in vs] == [Status.timeout, Status.timeout]
        assert all("drawing its inputs" in v.reason and "'load_task'" in v.reason for v in vs)
        assert counter.read_text().count("draw") == 1  # not once more per candidate
        assert ev.evaluate(softmax_task, cands[1]).correct  # the worker came back


BIG_SETS_TASK = """
import torch, torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return x * 2.0 + 1.0
rows = 3072
cols = 4096
FORGE = {{"vary": {{"rows": [3071, 3073]}}}}
def get_inputs():
    with open({counter!r}, "a") as f:
        f.write("draw\\\\n")
    return [torch.randn(rows, cols)]
def get_init_inputs():
    return []
"""

REUSED_OUTPUT = """
import torch, torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = None
    def forward(self, x):
        if self.out is None or self.out.shape != x.shape:
            self.out = torch.empty_like(x)
        return torch.mul(x, 2.0, out=self.out).add_(1.0)  # the same buffer, every call
"""


def test_input_sets_that_do_not_fit_together_are_drawn_one_at_a_time(cache_dir, fast_options, tmp_path):
    """Five 48 MiB input sets under a 1.5 GiB cap (forge's own copies get an eighth of it): each set is drawn when it is
    verified and dropped after, no more are kept for the next candidate than the budget holds, every set is still in
    the verdict, and a
    candidate that hands back one output buffer every call is still caught."""
    counter = tmp_path / "draws.txt"
    task_file = tmp_path / "big_sets.py"
    task_file.write_text(BIG_SETS_TASK.format(counter=str(counter)))
    task = load_task(task_file)
    options = fast_options.model_copy(update={"host_memory_limit_bytes": 3 << 29, "timing": False})
    with Evaluator("cpu", options=options, cache_dir=cache_dir / "big") as ev:
        v = ev_cand(
            ev,
            task,
            "import torch, torch.nn as nn\nclass ModelNew(nn.Module):\n"
            "    def forward(self, x):\n        return torch.addcmul(torch.ones_like(x), x, torch.tensor(2.0))\n",
        )
        assert v.correct, v.reason + v.traceback
        assert sorted({s.case for s in v.inputs}) == ["random#1", "random#2", "random#3", "rows=3071", "rows=3073"]
        assert v.memory is None or v.memory.host_peak_bytes is None or v.memory.host_peak_bytes < 3 << 29
        drawn = counter.read_text().count("draw")
        reused = ev_cand(ev, task, REUSED_OUTPUT)
    assert reused.status is Status.incorrect and reused.failed_check == "no_result_reuse", reused.reason
    assert counter.read_text().count("draw") > drawn  # drawn again: not every set was kept for the next candidate


INLINE_TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y):
        return torch.softmax(x, dim=1) + y


def get_inputs():
    return [torch.randn(16, 100), torch.rand((16, 100)) * 0.1]


def get_init_inputs():
    return []
"""

INLINE_HARD_CODED = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, y):
        return torch.softmax(x[:16], dim=1) + y[:16]  # the task's 16 rows, hard-coded
"""

INLINE_HONEST = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x, y):
        return torch.exp(x - torch.logsumexp(x, dim=1, keepdim=True)) + y
"""


def test_sizes_written_inline_in_get_inputs_are_varied_like_constants(cpu_evaluator, tmp_path):
    """A task with no size constant (`torch.randn(16, 100)` written inline): each distinct literal size becomes one
    size forge varies (both inputs' 16 together, both 100s together), so a candidate hard-coded to 16x100 fails
    `other_sizes`, and an honest one is verified at the other sizes."""
    path = tmp_path / "inline_softmax.py"
    path.write_text(INLINE_TASK)
    task = load_task(path)
    assert task.inline_sizes == {"inline_16": 16, "inline_100": 100}
    assert task.vary == {"inline_16": [9, 21], "inline_100": [51, 125]} and task.vary_default
    v = ev_cand(cpu_evaluator, task, INLINE_HARD_CODED, timing=False)
    assert v.status is Status.incorrect and v.failed_check == "other_sizes", v.reason
    assert "inline_16=21" in v.reason
    v = ev_cand(cpu_evaluator, task, INLINE_HONEST, timing=False)
    assert v.status is Status.correct, v.reason + v.traceback
    sizes = next(c for c in v.checks if c.name == "other_sizes")
    assert "inline_16=9" in sizes.detail and "inline_100=125" in sizes.detail, sizes.detail
    assert "own sizes only" not in v.reason


def test_a_verdict_at_the_tasks_own_sizes_only_says_so(cpu_evaluator, tmp_path):
    """Nothing to vary (the input is a literal tensor): the verdict's reason says the sizes were not varied, and
    why."""
    path = tmp_path / "fixed_input.py"
    path.write_text(
        INLINE_TASK.replace(
            "[torch.randn(16, 100), torch.rand((16, 100)) * 0.1]",
            "[torch.tensor([[1.0, 2.0, 3.0]]), torch.zeros(1, 1)]",
        ).replace("torch.zeros(1, 1)", "torch.tensor([[0.5]])")
    )
    task = load_task(path)
    assert task.vary == {} and task.inline_sizes == {}
    v = ev_cand(cpu_evaluator, task, INLINE_HONEST, timing=False)
    assert v.status is Status.correct, v.reason + v.traceback
    assert "at the task's own sizes only (get_inputs() has no size constant or literal size to vary)" in v.reason


INPUT_LOGGER = """
import torch
import torch.nn as nn

LOG = {log!r}


class ModelNew(nn.Module):
    def forward(self, x):
        with open(LOG, "a") as f:
            f.write(repr(round(float(x.double().sum()), 6)) + "\\n")
        return torch.softmax(x, dim=1)
"""


def test_the_timed_calls_inputs_are_new_to_every_evaluation(cpu_evaluator, softmax_task, tmp_path):
    """Timed inputs come from seeds nobody knows beforehand: two evaluations of one candidate see the same
    verification inputs (the task's seed) but timed inputs of their own, so a candidate cannot have drawn them
    itself at construction and have their answers ready."""
    seen, pooled = [], []
    for i in range(2):
        log = tmp_path / f"calls{i}.txt"
        src = INPUT_LOGGER.format(log=str(log))
        v = ev_cand(cpu_evaluator, softmax_task, src, name=f"logger{i}", min_reps=12, max_reps=12)
        assert v.status is Status.correct and v.timing is not None, v.reason + v.traceback
        seen.append(log.read_text().split())
        # a draw slower than the worker's budget (a loaded machine) times a pool: the verified sets and a few new draws
        pooled.append(any("cycle through" in n for n in v.timing.notes))
    first, second = (set(s) for s in seen)
    assert len(first & second) >= 3  # the verification inputs: the same for both
    for own, other, pool in ((first, second, pooled[0]), (second, first, pooled[1])):
        assert len(own - other) >= (1 if pool else 10), (pooled, len(own - other))  # the timed calls: each its own


# ----------------------------------------------------------------------------- the CPU's physical floor
def test_a_time_under_writing_the_outputs_once_is_under_the_floor():
    from forge_lsp.engine.worker import physical_floor

    bandwidth = 20e6  # bytes per ms: 20 GB/s, read and written
    floor, under_io = physical_floor(0.1, 64 << 20, 64 << 20, bandwidth, 16 << 20, 0.5)
    assert floor == pytest.approx((64 << 20) / bandwidth) and 0.1 < 0.5 * floor and under_io
    floor, under_io = physical_floor(10.0, 64 << 20, 64 << 20, bandwidth, 16 << 20, 0.5)
    assert floor is not None and 10.0 >= 0.5 * floor and not under_io
    assert physical_floor(0.001, 1 << 20, 1 << 20, bandwidth, 16 << 20, 0.5) == (None, False)  # fits the cache


AFFINE = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.addcmul(torch.ones_like(x), x, torch.full_like(x, 2.0))
"""


def test_on_the_cpu_an_honest_candidate_with_outputs_past_the_cache_clears_the_floor(cache_dir, fast_options):
    """The judge measures the machine's bandwidth once; a candidate that writes its 64 MiB of outputs is timed above
    the floor it sets, and the check says so."""
    task = load_task(FIXTURES / "wide_affine.py")
    with Evaluator("cpu", options=fast_options, cache_dir=cache_dir / "floor") as ev:
        v = ev_cand(ev, task, AFFINE, "affine")
    from forge_lsp.engine.worker import last_level_cache_bytes

    assert v.status is Status.correct, v.reason
    floor = next((c for c in v.checks if c.name == "impossible_timing"), None)
    if (64 << 20) >= 2 * last_level_cache_bytes():
        assert floor is not None and floor.passed and floor.seconds is not None
    else:  # a machine whose cache holds twice these outputs: the floor does not apply, and is not claimed
        assert floor is None


# ----------------------------------------------------------------------------- the process the next candidate meets
_LEAVES = {
    "nothing": "",
    "working-directory": "os.chdir('/')",
    "environment": "os.environ['CXX'] = 'false'",
    "builtins": "builtins.input = lambda *a: ''",
    "import-finder": "sys.meta_path.insert(0, _Finder())",
    "child-process": "_kept.append(subprocess.Popen(['sleep', '60']))",
}

_LEAVING = """
import builtins
import os
import subprocess
import sys

import torch
import torch.nn as nn

_kept = []


class _Finder:
    def find_spec(self, *args, **kwargs):
        return None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.done = False

    def forward(self, x):
        if not self.done:
            self.done = True
            LEAVE
        return torch.softmax(x, dim=1)
"""


@pytest.mark.parametrize("left", list(_LEAVES), ids=list(_LEAVES))
def test_a_worker_is_proven_clean_after_a_candidate_or_replaced(cpu_evaluator, softmax_task, left):
    """An honest candidate that leaves the process changed for the next one (its working directory, a toolchain
    variable, a builtin, an import finder of its own, a child process) keeps its verdict, and the next candidate runs
    in a fresh worker; one that leaves nothing changed keeps the worker."""
    before = cpu_evaluator.worker.restarts
    v = ev_cand(cpu_evaluator, softmax_task, _LEAVING.replace("LEAVE", _LEAVES[left] or "pass"), f"leaves_{left}")
    assert v.status is Status.correct, v.reason
    after = ev_cand(cpu_evaluator, softmax_task, C.TORCH_CORRECT, "after")
    assert after.status is Status.correct, after.reason
    assert cpu_evaluator.worker.restarts == before + (left != "nothing")
