"""The judge: a worker process that never runs candidate code. It draws input sets of its own, keeps the reference's
outputs on them, and compares what a candidate's process sends back as tensors (`clean_judge`). Real processes,
real pipes; the wire format is fed bad bytes as a candidate's process could send them."""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

import pytest
import torch

from forge_lsp.engine import Candidate, Evaluator, Status, pipe, sealed
from forge_lsp.engine.harness.wire import WireError, host_copy, pack, pack_parts, unpack
from forge_lsp.engine.pipe import EvaluateRequest, JudgedOutputs, JudgedSets
from forge_lsp.engine.task import load_task
from forge_lsp.engine.verdict import Check, Verdict
from forge_lsp.engine.worker.state import judged_data
from forge_lsp.engine.worker_client import Worker

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)

FIXTURES = Path(__file__).parent / "fixtures"
SOFTMAX = FIXTURES / "softmax_small.py"


# ------------------------------------------------------------------------------------------------ the wire format
@pytest.mark.parametrize("carry", ["wire", "host_copy"])
def test_values_cross_as_the_same_values_dtypes_shapes_and_dense_layouts(carry):
    # the judge keeps the reference's outputs as the wire would carry them (`host_copy`), without the bytes between
    permuted = torch.randn(3, 4, 5).permute(2, 0, 1)
    value = [
        permuted,
        torch.randn(4, 6)[:, ::2],  # a strided view: its values, contiguous
        (torch.arange(6).reshape(2, 3), 3, 2.5, float("inf"), None, True, "name", 10**30),
        {"k": torch.zeros(0, 3, dtype=torch.bfloat16), 7: torch.tensor(1.5, dtype=torch.float16)},
        torch.randn(2, 2, dtype=torch.complex64).conj(),
        torch.tensor([True, False]),
    ]
    got = unpack(pack(value)) if carry == "wire" else host_copy(value)
    assert torch.equal(got[0], permuted) and got[0].stride() == permuted.stride()
    assert got[0].untyped_storage().data_ptr() != permuted.untyped_storage().data_ptr()  # a copy, never the same memory
    assert torch.equal(got[1], value[1]) and got[1].is_contiguous()
    assert torch.equal(got[2][0], value[2][0]) and got[2][1:] == value[2][1:] and isinstance(got[2], tuple)
    assert got[3]["k"].shape == (0, 3) and got[3]["k"].dtype == torch.bfloat16 and got[3][7].item() == 1.5
    assert torch.equal(got[4], value[4].resolve_conj())
    assert got[5].dtype == torch.bool and got[5].tolist() == [True, False]


@pytest.mark.parametrize("value", [object(), {(1, 2): 3}, torch.zeros(2).to_sparse()], ids=["object", "key", "sparse"])
def test_what_cannot_cross_is_a_wire_error(value):
    with pytest.raises(WireError):
        pack(value)
    with pytest.raises(WireError):
        host_copy(value)


@pytest.mark.skipif(not sealed.supported(), reason="no sealed memory files here (Linux memfd seals, /proc)")
def test_a_sealed_file_is_read_by_path_and_written_by_no_one():
    # the judge's sets as a worker maps them: the same bytes; no process, its candidate's included, can change them
    value = [[torch.randn(8, 5)], [torch.randn(8, 5)]]
    f = sealed.seal(pack_parts(value))
    try:
        got = unpack(sealed.open_sealed(f.path, f.nbytes))
        assert all(torch.equal(a[0], b[0]) for a, b in zip(got, value, strict=True))
        fd = os.open(f.path, os.O_RDWR)  # a candidate opening the judge's file for writing
        try:
            with pytest.raises(PermissionError):
                os.write(fd, b"\x00" * 16)
            with pytest.raises(PermissionError):
                os.ftruncate(fd, 16)
        finally:
            os.close(fd)
        with pytest.raises(OSError):
            sealed.open_sealed(f.path, f.nbytes + 1)  # not the file announced
    finally:
        f.close()
    unsealed = os.memfd_create("plain")
    try:
        os.write(unsealed, b"x" * 16)
        with pytest.raises(OSError):
            sealed.open_sealed(f"/proc/{os.getpid()}/fd/{unsealed}", 16)  # a file anyone could still write
    finally:
        os.close(unsealed)


def test_bytes_from_a_candidates_process_give_a_value_or_a_wire_error_never_anything_else():
    good = pack([torch.randn(4, 4), (torch.arange(3), 1.0)])
    rng = random.Random(7)
    outcomes = {"value": 0, "error": 0}
    cases = [good[:n] for n in range(0, len(good), 7)] + [b"\xff" * 8 + good[8:], b"\x00" * 8]
    for _ in range(400):
        bad = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            bad[rng.randrange(len(bad))] = rng.randrange(256)
        cases.append(bytes(bad))
    for bad in cases:
        try:
            unpack(bad)
            outcomes["value"] += 1
        except WireError:
            outcomes["error"] += 1
    assert outcomes["error"] > 50, outcomes
    head = 8 + int.from_bytes(good[:8], "big")
    for _ in range(
        50
    ):  # bytes of the tensors' data changed: still a value (the judge's comparison then says how wrong)
        bad = bytearray(good)
        bad[rng.randrange(head, len(bad))] ^= 0xFF
        assert isinstance(unpack(bytes(bad)), list)


# ------------------------------------------------------------------------------------------------ the pipe
def test_a_message_with_data_arrives_whole_across_partial_reads_and_deadlines():
    r, w = os.pipe()
    rx = pipe.Receiver(r, pipe.REPLY)
    data = os.urandom(3 << 20)
    frame = JudgedOutputs(index=1).with_data(data)

    def writer():
        time.sleep(0.05)
        pipe.send(w, frame)
        pipe.send(w, pipe.StageStarted(stage="time"))

    t = threading.Thread(target=writer)
    t.start()
    got = None
    while got is None:  # short deadlines: the receiver keeps what it has read between calls
        got = rx.recv(time.monotonic() + 0.001)
    t.join()
    assert isinstance(got, JudgedOutputs) and got.index == 1 and bytes(got.data) == data
    assert rx.recv(time.monotonic() + 1) == pipe.StageStarted(stage="time")
    os.close(r)
    os.close(w)


def test_more_data_than_the_receiver_takes_ends_the_channel():
    r, w = os.pipe()
    rx = pipe.Receiver(r, pipe.REPLY, max_data=1024)
    header = JudgedOutputs(index=0, nbytes=1 << 30).model_dump_json().encode()
    os.write(w, len(header).to_bytes(4, "big") + header)
    with pytest.raises(pipe.Oversized):
        rx.recv(time.monotonic() + 1)
    os.close(r)
    os.close(w)


# ------------------------------------------------------------------------------------------------ the judge process
@pytest.fixture(scope="module")
def judge(cache_dir):
    j = Worker("cpu", cache_dir=cache_dir, judge=True)
    yield j
    j.close()


def sets_of(ready):
    """The input sets of a judge's reply, as a worker reads them: the data, or the judge's sealed file mapped."""
    return unpack(judged_data(ready.data, ready.sealed))


@pytest.mark.parametrize("sealed", ["sealed", "piped"])
def test_the_judge_draws_its_own_sets_and_compares_what_it_is_sent(judge, fast_options, sealed, monkeypatch):
    monkeypatch.setenv("FORGE_JUDGE_SEALED", "1" if sealed == "sealed" else "0")
    task = load_task(SOFTMAX)
    ready = judge.ready(task, fast_options)
    assert ready.ok and ready.sets == 2, ready
    assert (ready.sealed is not None) == (sealed == "sealed") and (ready.nbytes == 0) == (sealed == "sealed")
    sets = sets_of(ready)
    assert [list(s[0].shape) for s in sets] == [[16, 100], [16, 100]]  # the task's own sizes
    assert not torch.equal(sets[0][0], sets[1][0])
    again = sets_of(judge.ready(task, fast_options))
    assert not torch.equal(again[0][0], sets[0][0])  # new seeds each time it is asked: none a candidate can replay

    def compared(index, out):
        return judge.compare(task, fast_options, JudgedOutputs(index=index).with_data(pack(out)))

    right = [torch.softmax(s[0], dim=1) for s in again]
    assert compared(0, right[0]).passed and compared(1, right[1]).passed
    wrong = compared(1, torch.softmax(again[1][0] * 0.99, dim=1))
    assert not wrong.passed and wrong.mismatch is not None and "judged input set #2" in wrong.detail
    assert not compared(0, right[1]).passed  # another set's right answer is a wrong answer here
    shape = compared(0, right[0][:8])
    assert not shape.passed and shape.mismatch is not None
    garbage = judge.compare(task, fast_options, JudgedOutputs(index=0).with_data(b"\x00" * 64))
    assert not garbage.passed and "did not arrive as tensors" in garbage.detail
    assert compared(0, right[0]).passed  # the judge is still there, and still right


def test_the_judge_process_refuses_candidate_requests(cache_dir, fast_options):
    j = Worker("cpu", cache_dir=cache_dir, judge=True)
    try:
        j.ensure_started()
        cand = Candidate.from_source("import torch\nclass ModelNew(torch.nn.Module):\n    pass\n", "x")
        request = EvaluateRequest(task=load_task(SOFTMAX), candidate=cand, options=fast_options)
        pipe.send(j._to, request)
        assert j.proc is not None and j.proc.wait(timeout=60) == 2
    finally:
        j.close()


def test_a_correct_verdict_without_the_judged_outputs_is_not_confirmed(cache_dir, fast_options):
    worker = Worker("cpu", cache_dir=cache_dir)
    try:
        task = load_task(SOFTMAX)
        ready = worker._judge_ready(task, fast_options)
        assert ready is not None and ready.ok
        said = Verdict(
            status=Status.correct, reason="all checks passed", checks=[Check(name="outputs_match", passed=True)]
        )
        sets = sets_of(ready)
        only_one = [JudgedOutputs(index=0).with_data(pack(torch.softmax(sets[0][0], dim=1)))]
        worker._judge_verdict(said, task, fast_options, ready, only_one)
        assert said.status is Status.incorrect and said.failed_check == "clean_judge"
        assert "1 of the 2 input sets" in said.reason
    finally:
        worker.close()


# ------------------------------------------------------------------------------------------------ end to end
_COUNTING = """
import torch
import torch.nn as nn

_calls = [0]


class ModelNew(nn.Module):
    def forward(self, x):
        _calls[0] += 1
        with open({path!r}, "w") as f:
            f.write(str(_calls[0]))
        if _calls[0] > {honest}:
            return torch.softmax(x * 0.9, dim=1)  # wrong from here on
        return torch.softmax(x, dim=1)
"""


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda:0", marks=pytest.mark.gpu)])
def test_a_candidate_wrong_only_after_the_verified_calls_is_caught_by_the_judge(
    cache_dir, fast_options, tmp_path, device
):
    """Timing off: verification makes a fixed number of calls, and a candidate wrong from the next one on passes every
    check inside its process. The judge's input sets are run after those, and their outputs judged apart."""
    task = load_task(SOFTMAX)
    count = tmp_path / "calls"
    # `repeatable`'s runs bounded by their count alone: the calls verification makes stay the same in each evaluation
    options = fast_options.model_copy(update={"timing": False, "device": device, "repeat_budget_s": 600.0})
    with Evaluator(device, options=options, cache_dir=cache_dir) as ev:
        honest = ev.evaluate(task, Candidate.from_source(_COUNTING.format(path=str(count), honest=10**9), "count"))
        assert honest.status is Status.correct, honest.reason
        assert any(c.name == "clean_judge" and c.passed for c in honest.checks)
        verified = int(count.read_text()) - options.judged_sets  # the calls before the judged ones
        cheat = Candidate.from_source(_COUNTING.format(path=str(count), honest=verified), "late")
        unjudged = ev.evaluate(task, cheat, options.model_copy(update={"judged_sets": 0}))
        assert unjudged.status is Status.correct, unjudged.reason  # inside its own process, nothing saw it
        judged = ev.evaluate(task, cheat)
    assert judged.status is Status.incorrect and judged.failed_check == "clean_judge", judged.reason
    assert "judged input set #1" in judged.reason and judged.mismatch is not None
    assert judged.timing is None


_SOFTMAX = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)  # {n}
"""

#: a candidate that, when its module loads, drops the judge's sets the worker keeps (as a candidate may do to its own
#: process): the next candidate's request comes without them
_DROPS_KEPT_SETS = """
import gc

import torch
import torch.nn as nn

for o in gc.get_objects():
    if type(o).__name__ == "WorkerState":
        o.judged = None


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""


@pytest.mark.parametrize("sealed", ["sealed", "piped"])
def test_a_worker_keeps_the_judges_sets_and_is_sent_them_again_when_they_were_lost(
    cache_dir, fast_options, monkeypatch, sealed
):
    """The judge's input sets go to the worker while the task's first candidate runs (drawn beside it) and are kept
    there: the next candidates' requests come without them and are still judged apart. A worker that lost them (here a
    candidate dropped them) runs no judged call; the candidate after is evaluated again with the sets, not failed for
    it. The same whether the sets cross the pipes or the worker maps the judge's sealed file (`engine.sealed`)."""
    monkeypatch.setenv("FORGE_JUDGE_SEALED", "1" if sealed == "sealed" else "0")
    sent: list[tuple[str, int]] = []
    real_send = pipe.send

    def recording(fd, message, **kw):
        if isinstance(message, EvaluateRequest):
            sent.append((message.candidate.name, message.judged_bytes))
            assert (message.judged_sealed is not None) == (sealed == "sealed" and message.judged_bytes > 0)
        elif isinstance(message, JudgedSets):
            size = message.sealed.nbytes if message.sealed is not None else message.nbytes
            assert (message.sealed is not None) == (sealed == "sealed") and (message.nbytes == 0) == (
                sealed == "sealed"
            )
            sent.append(("(the judge's sets, drawn as the first one ran)", size))
        real_send(fd, message, **kw)

    monkeypatch.setattr(pipe, "send", recording)
    task = load_task(SOFTMAX)
    options = fast_options.model_copy(update={"timing": False})
    with Evaluator("cpu", options=options, cache_dir=cache_dir) as ev:
        ev.worker.draw_beside = True  # as on a GPU (on the CPU the draw comes first: nothing keeps its timings apart)
        verdicts = [ev.evaluate(task, Candidate.from_source(_SOFTMAX.format(n=n), f"honest{n}")) for n in (1, 2)]
        verdicts.append(ev.evaluate(task, Candidate.from_source(_DROPS_KEPT_SETS, "drops")))
        verdicts.append(ev.evaluate(task, Candidate.from_source(_SOFTMAX.format(n=3), "honest3")))
    for v in verdicts:
        assert v.status is Status.correct, v.reason
        judged = next(c for c in v.checks if c.name == "clean_judge")
        assert judged.passed and "match" in judged.detail, judged.detail
    drawn = "(the judge's sets, drawn as the first one ran)"
    with_sets = [name for name, nbytes in sent if nbytes > 0]
    assert [name for name, _ in sent] == ["honest1", drawn, "honest2", "drops", "honest3", "honest3"], sent
    assert with_sets == [drawn, "honest3"], sent  # after the task's first request, and with honest3's second


#: a candidate that ends its judge (a sibling process: the same parent, "--judge" in its title) on every call
_ENDS_ITS_JUDGE = """
import os
import signal

import torch
import torch.nn as nn


def _end_judges():
    mine = os.getppid()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                title = f.read()
            with open(f"/proc/{pid}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
        if b"--judge" in title and parent == mine:
            os.kill(int(pid), signal.SIGKILL)


class ModelNew(nn.Module):
    def forward(self, x):
        _end_judges()
        return torch.softmax(x, dim=1)
"""


@pytest.mark.skipif(not sealed.supported(), reason="no sealed memory files here (Linux memfd seals, /proc)")
def test_sets_whose_judge_ended_are_drawn_again_and_the_candidate_is_judged_not_failed(
    cache_dir, fast_options, monkeypatch
):
    """The sealed file of a judge's sets lives while that judge does. A judge that ended between evaluations (as
    a cancel or a candidate may end it) before forge saw it leaves a path the next worker cannot map: the worker says so
    and runs no judged call, and the candidate is evaluated again beside a new judge, judged, not failed for it."""
    monkeypatch.setenv("FORGE_JUDGE_SEALED", "1")
    task = load_task(SOFTMAX)
    options = fast_options.model_copy(update={"timing": False})
    with Evaluator("cpu", options=options, cache_dir=cache_dir) as ev:
        first = ev.evaluate(task, Candidate.from_source(_SOFTMAX.format(n=1), "honest1"))
        assert first.status is Status.correct, first.reason
        judge = ev.worker._judge
        assert judge is not None and judge.proc is not None
        path = ev.worker._judged[task.sha][1].sealed.path
        ev.worker.kill()  # a new worker: the sets must be sent to it again
        gone = judge.proc
        os.kill(gone.pid, 9)
        gone.wait(10)
        # forge has not seen it end yet (the race a cancel meets): the judge looks alive and its file there
        monkeypatch.setattr(gone, "poll", lambda: None)
        real_exists = os.path.exists
        monkeypatch.setattr(os.path, "exists", lambda p: True if p == path else real_exists(p))
        second = ev.evaluate(task, Candidate.from_source(_SOFTMAX.format(n=2), "honest2"))
        assert judge.proc is not gone  # a new judge drew the sets again
    assert second.status is Status.correct, second.reason
    judged = next(c for c in second.checks if c.name == "clean_judge")
    assert judged.passed and "match" in judged.detail, judged.detail


@pytest.mark.parametrize("beside", [False, True], ids=["drawn-first", "drawn-beside"])
def test_a_candidate_that_ends_its_judge_is_not_confirmed_and_the_next_one_is_judged(cache_dir, fast_options, beside):
    """Ending the judge (it is a process beside the worker) must not skip its word, whether it drew the sets before
    the evaluation or draws them beside it: the candidate is evaluated again beside a new judge, which it ends again,
    and `clean_judge` fails; an honest candidate after it is judged."""
    task = load_task(SOFTMAX)
    options = fast_options.model_copy(update={"timing": False})
    with Evaluator("cpu", options=options, cache_dir=cache_dir) as ev:
        ev.worker.draw_beside = beside
        ends = ev.evaluate(task, Candidate.from_source(_ENDS_ITS_JUDGE, "ends_judge"))
        honest = ev.evaluate(task, Candidate.from_source(_SOFTMAX.format(n=9), "honest"))
    assert ends.status is Status.incorrect and ends.failed_check == "clean_judge", ends.reason
    assert "judge ended" in ends.reason and "again" in ends.reason, ends.reason
    assert honest.status is Status.correct, honest.reason
    assert any(c.name == "clean_judge" and c.passed and "match" in c.detail for c in honest.checks)


def test_the_judges_sets_follow_the_request_only_once_it_went_out_whole():
    """Sets drawn before the request is written (a judge that answers at once) wait for it: two writers on one pipe
    would interleave their bytes. Once the evaluation ended, sets not yet sent are not sent at all."""
    from concurrent.futures import Future

    from forge_lsp.engine.pipe import JudgeReady
    from forge_lsp.engine.worker_client import _SetsFollow

    def drawn() -> Future:
        done: Future = Future()
        done.set_result(JudgeReady(ok=True, sets=1).with_data(pack([[torch.ones(3)]])))
        done.result().key = "1:1"
        return done

    r, w = os.pipe()
    try:
        follow = _SetsFollow(drawn())
        os.set_blocking(r, False)
        with pytest.raises(BlockingIOError):
            os.read(r, 1)  # drawn, but the request is not out yet: nothing written
        follow.open(w)
        assert follow.finish()
        rx = pipe.Receiver(r, pipe.REQUEST)
        os.set_blocking(r, True)
        got = rx.recv(time.monotonic() + 5)
        assert isinstance(got, JudgedSets) and got.key == "1:1" and follow.sent
        assert torch.equal(unpack(got.data)[0][0], torch.ones(3))

        late: Future = Future()
        unsent = _SetsFollow(late)
        unsent.open(w)
        assert unsent.finish()  # the evaluation ended before the draw did
        late.set_result(drawn().result())
        os.set_blocking(r, False)
        with pytest.raises(BlockingIOError):
            os.read(r, 1)
        assert not unsent.sent
    finally:
        os.close(r)
        os.close(w)


_MATMUL = FIXTURES / "matmul_cpu.py"

_MM = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.mm(a, b)
"""

#: processes, not threads (no thread of the worker's is busy): running only while the reference runs
_BURNERS = """
import os
import signal
import subprocess
import sys

import torch
import torch.nn as nn

_burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(8 * (os.cpu_count() or 2))]


class ModelNew(nn.Module):
    def forward(self, a, b):
        for p in _burners:
            os.kill(p.pid, signal.SIGSTOP)
        try:
            return torch.mm(a, b)
        finally:
            for p in _burners:
                os.kill(p.pid, signal.SIGCONT)
"""


def test_processes_that_slow_the_reference_fail_and_an_honest_reference_times_the_same(cache_dir, fast_options):
    """The judge times the reference alone. Processes the candidate starts that take the CPU only while the reference
    runs (stopped for its own calls) are its descendants and fail `background_threads`. An honest candidate's reference
    times the same beside it as alone in the judge, and its speedup stands."""
    task = load_task(_MATMUL)
    with Evaluator("cpu", options=fast_options, cache_dir=cache_dir / "reftime") as ev:
        # under the whole suite's load the worker's timing may meet a burst the judge's does not: then the timing is
        # rightly withheld ("the machine was busy then"); an honest reference times the same on one of three tries
        for _ in range(3):
            honest = ev.evaluate(task, Candidate.from_source(_MM, "mm"))
            timed = next(c for c in honest.checks if c.name == "reference_timing")
            if not timed.detail.startswith("inconclusive"):
                break
        own = ev.evaluate(task, Candidate.from_source(_BURNERS, "burners"))
    assert honest.status is Status.correct, honest.reason
    assert timed.passed and timed.detail.startswith("the reference beside the candidate"), timed.detail
    assert honest.timing is not None
    assert own.status is Status.incorrect and own.failed_check == "background_threads", own.reason
    assert "process" in (next(c for c in own.checks if c.name == "background_threads").detail or ""), own.checks


#: a task whose reference is slower in a process where something set a variable: what no check of the worker's reads
#: (a slowdown of the kind the worker cannot see, as load from elsewhere on the machine would be)
_SLOWED_BY_A_MARK = """
import os
import time

import torch
import torch.nn as nn

n = {n}

FORGE = {{"vary": {{}}, "trials": 1}}


class Model(nn.Module):
    def forward(self, a, b):
        if os.environ.get("FORGE_TEST_REFERENCE_SLOWED"):
            time.sleep({sleep})  # many times the product's time, even on a machine busy enough to slow it 10x
        return a @ b


def get_inputs():
    return [torch.randn(n, n), torch.randn(n, n)]


def get_init_inputs():
    return []
"""

_SETS_THE_MARK = """
import os

import torch
import torch.nn as nn

os.environ["FORGE_TEST_REFERENCE_SLOWED"] = "1"


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.mm(a, b)
"""


def test_a_reference_slowed_beside_the_candidate_gets_no_speedup(cache_dir, fast_options, tmp_path):
    """The reference runs several times slower beside the candidate than alone in the judge, by a cause no check of
    the worker's sees; the judge times it again and it is still faster there: the timing is withheld as inconclusive
    (no speedup claimed; a busy machine would look the same), and the verdict says why."""
    path = tmp_path / "matmul_slowed.py"
    path.write_text(_SLOWED_BY_A_MARK.format(n=512, sleep=0.1))
    with Evaluator("cpu", options=fast_options, cache_dir=cache_dir / "reftime") as ev:
        slowed = ev.evaluate(load_task(path), Candidate.from_source(_SETS_THE_MARK, "mark"))
    timed = next(c for c in slowed.checks if c.name == "reference_timing")
    assert timed.detail.startswith("inconclusive, timing withheld: the reference ran"), timed.detail
    assert slowed.timing is None and "slower beside the candidate" in slowed.reason, slowed.reason


def _judges_alive() -> list[int]:
    """This process's descendants that are judge workers."""
    out, todo = [], [os.getpid()]
    while todo:
        pid = todo.pop()
        try:
            kids = [
                int(c)
                for t in os.listdir(f"/proc/{pid}/task")
                for c in open(f"/proc/{pid}/task/{t}/children").read().split()
            ]
        except OSError:
            continue
        todo += kids
        for k in kids:
            try:
                if b"--judge" in open(f"/proc/{k}/cmdline", "rb").read():
                    out.append(k)
            except OSError:
                pass
    return out


@pytest.mark.integration
def test_a_worker_closed_while_its_judge_starts_leaves_no_judge_running(cache_dir):
    """The judge starts in the background; a worker closed before or while it does (a run cancelled as it began)
    leaves no judge process behind (judges of fixtures that other tests in this pytest process hold are not its own)."""
    before = set(_judges_alive())
    for _ in range(4):
        worker = Worker("cpu", cache_dir=cache_dir, judged=True)
        worker._start_judge()
        worker.close()
    for thread in threading.enumerate():  # the judges' start-ups, over whatever they started
        if thread.name.startswith("forge-judge-"):
            thread.join(timeout=120)
    deadline = time.monotonic() + 30
    while set(_judges_alive()) - before and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not set(_judges_alive()) - before
