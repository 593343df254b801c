"""Timing in the worker process, with the device's gate held alone: the interleaved timing that verifies itself,
the input contents it draws, the physical floor, and the candidate's calls on the judge's input sets."""

from __future__ import annotations

import secrets
import time
from typing import Any

from .. import pipe
from ..pipe import (
    JudgedOutputs,
)
from .state import (
    InputCase,
    Models,
    StageFailed,
    exception_line,
    last_level_cache_bytes,
    physical_floor,
    seed_all,
    task_constants,
)
from .verify import Verification


class Timed(Verification):
    """Timing and the judged calls (see the module's docstring)."""

    def time_both(self, mod: Any, models: Models, case: InputCase) -> None:
        """Interleaved timing that verifies itself: before every call the inputs get new contents in place
        (reference and candidate the same ones), and every timed candidate output is compared with the
        reference's on the same inputs. A candidate right when verified but wrong when timed fails."""
        from ..harness import timing as T
        from ..harness.checks import clone_inputs
        from ..harness.compare import SAMPLE, compare_outputs, sample_disagrees
        from ..harness.loading import call_model
        from ..harness.probes import InputRefresher, tensor_bytes

        torch = self.torch
        ref_in, cand_in = clone_inputs(case.inputs), clone_inputs(case.inputs)
        self.where = self.describe_set(case, what="timed, with new contents drawn from get_inputs() before each call")
        opt, notes = self.opt, list[str]()
        draw, pool, how = self.timing_contents(mod, case)
        kinds = self.task.input_kinds
        permutable = (
            [k in ("normal", "iid") for k in kinds]
            if kinds is not None and len(kinds) == len(case.inputs)
            else [False] * len(case.inputs)
        )
        refresher = InputRefresher([ref_in, cand_in], draw=draw, pool=pool, permutable=permutable, seed=None)
        if how:
            notes.append(how)
        if self.cpu_share is not None and self.cpu_share.says():
            notes.append(self.cpu_share.says())
        last: dict[str, Any] = {}

        def ref_fn() -> Any:
            last["ref"] = call_model(models.ref, ref_in)
            return last["ref"]

        def cand_fn() -> Any:
            last["cand"] = call_model(models.cand, cand_in)
            return last["cand"]

        # every timed call is checked in full when outputs are small; big ones: the first calls, every nudged call, a
        # random eighth of the others (which ones, a candidate cannot tell) and the last, and every other call at
        # random positions of each output (a disagreement there sends it to the full comparison)
        small = tensor_bytes(case.inputs) < (4 << 20)
        # which calls are checked: the OS's randomness per call, no generator whose state the candidate could read
        # or replay
        checked = {"calls": 0, "last": -1, "seen": -1, "sampled": 0}

        def refresh(i: int) -> None:
            with self.cost("timed_outputs_match"):
                refresher.refresh(i)

        def check_call(i: int, force: bool = False) -> None:
            checked["seen"] = max(checked["seen"], i)
            if self.threads is not None:  # after every pair, outside the timed calls (~20 us)
                self.threads.returned()
            with self.cost("timed_outputs_match"):
                if not (force or small or i < 3 or refresher.nudges(i) or secrets.randbelow(8) == 0):
                    self.sync()
                    if not sample_disagrees(last.get("ref"), last.get("cand"), self.task.tolerance_for):
                        checked["sampled"] += 1
                        return
                compare_call(i)

        def compare_call(i: int) -> None:
            self.sync()
            ref_out, cand_out = last.get("ref"), last.get("cand")
            where = f"timed call {i + 1}"
            if i < 3 or secrets.randbelow(4) == 0:  # the comparison below is the harness's own (a check: ~0.6 ms)
                self.check_patches()
                self.watch_state(
                    f"while it was timed (after {where})", kernels=True
                )  # what the next reference runs under
            self.check_plain_outputs(cand_out, where)
            mismatch, _ = compare_outputs(ref_out, cand_out, self.task.tolerance_for, where)
            if mismatch is not None:
                self.check(
                    "timed_outputs_match",
                    False,
                    f"[{where}] {mismatch.output}: {mismatch.detail} — while being timed (new input contents every "
                    "call) the candidate's output differs from the reference's on the same inputs: results reused "
                    "or cached on the inputs, or behaviour that changes between calls",
                    mismatch,
                )
            self.hold(where, cand_out)  # a buffer the candidate hands out again later is seen at the end
            checked["calls"] += 1
            checked["last"] = i

        kw: dict[str, Any] = dict(
            warmup=opt.warmup,
            min_reps=opt.min_reps,
            max_reps=opt.max_reps,
            budget_s=opt.timing_budget_s,
            precision=opt.timing_precision,
            before_pair=refresh,
            after_pair=check_call,
        )
        if not self.is_cuda:
            ref, cand = T.run_interleaved(T.cpu_sampler(ref_fn), T.cpu_sampler(cand_fn), **kw)
            self.timing = T.summarize("cpu", ref, cand, False, notes)
            self.check_physical_floor(tensor_bytes(cand_in), tensor_bytes(last.get("cand")), notes)
        else:
            timer = T.CudaTimer(self.device, opt.l2_flush)
            gap = timer.escaped_ms(ref_fn, cand_fn)
            cand_host = timer.hide_host_overhead(ref_fn, cand_fn)
            limit = max(0.05, 0.5 * cand_host)
            # work that escapes the stream delays every round; another process's kernels on the device delay some:
            # the smallest of up to four rounds decides
            for _ in range(3 if gap > limit else 0):
                gap = min(gap, timer.escaped_ms(ref_fn, cand_fn))
                if gap <= limit:
                    break
            self.check(
                "all_streams_timed",
                gap <= limit,
                f"the device stays busy {gap:.3f} ms after the candidate's stream finished: work on "
                "another stream escapes the timed region; join it to the current stream",
            )
            mode = opt.timing_mode
            if self.streams == "default" and mode != "events":
                # CUDA graphs capture on a side stream, where a legacy-stream launch is an error: time it with events
                notes.append(
                    "timed with events: the candidate launches on the legacy default stream, which a CUDA "
                    "graph cannot capture"
                )
                mode = "events"
            if mode == "auto":
                probe = T.Samples()
                for _ in range(5):
                    timer.sample(ref_fn, probe)
                mode = "graph" if min(probe.device_ms) < opt.graph_below_ms else "events"
            self.timing = None
            if mode == "graph":
                try:
                    ref_t, cand_t = (
                        T.GraphTimer(self.device, opt.l2_flush, ref_fn),
                        T.GraphTimer(self.device, opt.l2_flush, cand_fn),
                    )
                    ref_t.delay_cycles = cand_t.delay_cycles = timer.delay_cycles  # replays enqueue faster still
                    ref, cand = T.run_interleaved(
                        lambda s: ref_t.sample(ref_fn, s), lambda s: cand_t.sample(cand_fn, s), **kw
                    )
                    self.timing = T.summarize("graph", ref, cand, opt.l2_flush, notes)
                except StageFailed:
                    raise
                except Exception as exc:  # noqa: BLE001 - capture is optional; fall back to events
                    notes.append(f"CUDA graph capture failed, timed with events instead: {exception_line(exc)}")
                    torch.cuda.synchronize(self.device)
            if self.timing is None:
                ref, cand = T.run_interleaved(
                    lambda s: timer.sample(ref_fn, s), lambda s: timer.sample(cand_fn, s), **kw
                )
                self.timing = T.summarize("events", ref, cand, opt.l2_flush, notes)
            self.check_physical_floor(tensor_bytes(cand_in), tensor_bytes(last.get("cand")), notes)
        if checked["seen"] >= 0 and checked["last"] != checked["seen"]:
            check_call(checked["seen"], force=True)  # the last call's outputs, if not checked yet
        self.check(
            "timed_outputs_match",
            True,
            f"every timed call ({checked['calls']}) checked against the reference on new input contents"
            if not checked["sampled"]
            else f"every timed call checked against the reference on new input contents: {checked['calls']} in full, "
            f"{checked['sampled']} at {SAMPLE} random elements of each output",
        )

    #: a fresh draw of get_inputs() per timed call when one costs at most this (seconds); else a pool drawn beforehand
    FRESH_DRAW_S = 0.003

    #: the pool's draws may take this long in all (seconds), and hold at most this share of the device's free memory
    POOL_DRAW_S = 2.0

    POOL_MEMORY_SHARE = 0.125

    POOL_MAX = 8

    def draw_fresh(self, mod: Any, case: InputCase, seed: int) -> list[Any] | None:
        """A new call of the task's `get_inputs()` (its sizes as in `case`), seeded, made on the device where it can
        be (factory calls default to it: far faster than drawing large inputs on the host and copying them over);
        None when it fails or gives inputs laid out otherwise than `case`'s."""
        from ..harness.probes import same_layout

        torch = self.torch
        fn = getattr(mod, self.task.inputs_fn)
        with task_constants(mod, case.overrides):
            for where in [self.device, None] if self.is_cuda else [None]:
                try:
                    seed_all(torch, seed)
                    if where is not None:
                        with torch.device(where):
                            drawn = list(fn())
                    else:
                        drawn = list(fn())
                    drawn = self.to_device(drawn)
                except Exception:  # noqa: BLE001 - the task's code cannot draw here; try the host, else none
                    continue
                if same_layout(drawn, case.inputs):
                    return drawn
        return None

    def timing_contents(self, mod: Any, case: InputCase) -> tuple[Any, list[list[Any]], str]:
        """Where the timed calls' contents come from: (draw, pool, a note). A new draw of `get_inputs()` per call when
        one is cheap; else a pool of draws made now, within a time and memory budget, plus the verified input sets of
        the same sizes. Never a transform of the task's inputs: only new draws keep structured inputs (a triangular
        matrix, probability rows, sorted ids) in the task's distribution."""
        from ..harness.probes import same_layout, tensor_bytes

        # seeds nobody can know in advance (not the task's seed plus a constant): a candidate that drew the timed
        # calls' inputs itself beforehand, at construction, would have their answers ready
        base = 20_000 + secrets.randbelow(1 << 30)
        took = float("inf")
        first = None
        for k in range(2):  # the second draw's time: the first may pay for a warm-up of its own
            t0 = time.perf_counter()
            first = self.draw_fresh(mod, case, base - k)
            self.sync()
            took = time.perf_counter() - t0
            if first is None:
                break
        if first is not None and took <= self.FRESH_DRAW_S:
            cache = {0: first}

            def draw(call: int) -> list[Any] | None:
                return cache.pop(call) if call in cache else self.draw_fresh(mod, case, base + call)

            return draw, [], ""
        pool = [case.inputs] + ([first] if first is not None else [])
        kept = self.state.drawn
        for key, (inputs, _init) in kept.items():
            if (
                key[0] == self.task.sha
                and not key[2]
                and inputs is not case.inputs
                and same_layout(inputs, case.inputs)
            ):
                pool.append(inputs)  # the other verified input sets of the task's own sizes
        if first is not None:
            budget = self.POOL_MEMORY_SHARE * (self.free_memory() or float("inf"))
            size = max(1, tensor_bytes(case.inputs))
            n = 1
            while len(pool) < self.POOL_MAX and (n + 1) * took <= self.POOL_DRAW_S and size * (len(pool) + 1) <= budget:
                more = self.draw_fresh(mod, case, base + n)
                n += 1
                if more is None:
                    break
                pool.append(more)
        if first is None:
            note = (
                f"get_inputs() cannot draw new inputs of these sizes in the worker: the timed calls cycle through "
                f"{len(pool)} verified input set(s)"
            )
        else:
            note = (
                f"drawing get_inputs() takes {took * 1000:.0f} ms: the timed calls cycle through {len(pool)} input "
                "sets drawn beforehand"
            )
        return None, pool, note

    #: on the CPU, a time under this share of the floor fails (a share of the GPU's 0.9): the bandwidth is measured
    #: once, and a machine busy then measures it low
    CPU_FLOOR_MARGIN = 0.5

    def check_physical_floor(self, in_bytes: int, out_bytes: int, notes: list[str]) -> None:
        """A candidate timed faster than writing its outputs once at the device's measured memory bandwidth did
        not produce them in the timed call; one faster than reading its inputs and writing its outputs once is
        noted (an algorithmic shortcut can be honest). The bandwidth comes from the judge (a process no candidate
        ran in) where there is one, else it is measured here; outputs that fit twice in the cache are not judged."""
        torch = self.torch
        if self.timing is None:
            return
        if self.is_cuda:
            cache = getattr(torch.cuda.get_device_properties(self.device), "L2_cache_size", 64 << 20)
            margin = 0.9
        else:
            cache, margin = last_level_cache_bytes(), self.CPU_FLOOR_MARGIN
        with self.cost("impossible_timing"):  # measured once per process
            bandwidth = self.bandwidth_given or self.state.bandwidth(torch)  # bytes/ms
        rate = f"{bandwidth / 1e9:.2f} TB/s" if bandwidth >= 1e9 else f"{bandwidth / 1e6:.1f} GB/s"
        t = self.timing.candidate.median_ms
        floor, under_io = physical_floor(t, in_bytes, out_bytes, bandwidth, cache, margin)
        if floor is not None:
            self.check(
                "impossible_timing",
                t >= margin * floor,
                f"timed at {t * 1000:.1f} us, less than writing its {out_bytes / 2**20:.0f} MiB of outputs once takes "
                f"at the measured {rate} ({floor * 1000:.1f} us): the timed call cannot have produced them",
            )
        if under_io:
            notes.append(
                f"faster than reading its inputs and writing its outputs once at {rate}: an algorithmic shortcut "
                "that skips part of the inputs (or a result not computed in the timed call)"
            )

    # ------------------------------------------------------------------ driver
    def judged_sets(self) -> list[tuple[int, list[Any]]]:
        """The judge's input sets sent with the request, as (index, inputs on the host)."""
        from ..harness.wire import WireError, unpack

        if self._judged_sets is None:
            self._judged_sets = []
            if self.state.judged_unmapped:  # the judge's file is gone: no judged call (said in the result)
                return self._judged_sets
            if not self.judged_data and getattr(self.req, "judged_follow", False):
                self.receive_judged_sets()
            if self.judged_data:
                try:
                    sets = unpack(self.judged_data)
                except WireError as exc:  # forge's own bytes: the parent sends only what the judge packed
                    raise RuntimeError(f"the judge's input sets did not arrive whole: {exc}") from exc
                self._judged_sets = list(enumerate(sets))
        return self._judged_sets

    def receive_judged_sets(self) -> None:
        """The judge's sets that follow the request (`JudgedSets`): waited for here, the device's gate given up
        meanwhile (the judge drawing them may need it to time the reference alone)."""
        from ..pipe import JudgedSets

        t0 = time.perf_counter()
        with self.state.gate.paused():
            msg = self.state.receiver.recv()
        self.stages["judged_wait"] = round(time.perf_counter() - t0, 4)
        if not isinstance(msg, JudgedSets):  # forge's own messages: the parent sends nothing else mid-evaluation
            raise RuntimeError(f"the judge's input sets did not arrive: a {msg.kind} request came instead")
        if not msg.ok:
            self.state.judged = None
            return
        data = self.state.take_judged(msg.key, msg.data, msg.sealed)
        if data is None:  # the judge ended since it drew them: said in the result, evaluated again
            return
        self.judged_data = data
        self.bandwidth_given = self.bandwidth_given or msg.bandwidth

    #: seconds the eager calls after a graph-replayed timing may take (`eager_calls`)
    EAGER_CALLS_S = 0.5

    def eager_calls(self, models: Models, case: InputCase) -> None:
        """After a timing that replayed a CUDA graph, the candidate's Python forward ran only to record it: call it
        eagerly as many times as the timing replayed it (within `EAGER_CALLS_S`), so that the judged calls after
        timing come after as many calls as a timed candidate's anywhere: what changes after N calls shows there."""
        from ..harness.checks import clone_inputs
        from ..harness.loading import call_model

        timing = self.timing
        if timing is None or timing.mode != "graph":
            return
        wanted = timing.candidate.n + self.opt.warmup
        with self.cost("clean_judge"):
            inputs = self.to_device(clone_inputs(case.inputs))
            deadline = time.perf_counter() + self.EAGER_CALLS_S
            for i in range(wanted):
                call_model(models.cand, inputs)
                if i % 16 == 15:
                    self.sync()
                    if time.perf_counter() > deadline:
                        break
            self.sync()

    def judged_calls(self, models: Models, sets: list[tuple[int, list[Any]]]) -> None:
        """The candidate on the judge's input sets, each output sent to the parent (`JudgedOutputs`) as soon as the
        call returned and the usual checks after a call passed, before any more candidate code runs: the judge, a
        process that never ran candidate code, compares it with the reference's output computed there."""
        from ..harness.checks import clone_inputs
        from ..harness.wire import WireError, pack

        for index, inputs in sets:
            with self.cost("clean_judge"):
                self.where = f"judged input set #{index + 1} (the task's own sizes)"
                out = self.call(models.cand, self.to_device(clone_inputs(inputs)), "candidate")
                self.sync()
                try:
                    data = pack(out)
                except WireError as exc:
                    self.check("clean_judge", False, f"[{self.where}] its output cannot be sent to the judge: {exc}")
                del out
                pipe.send(self.out_fd, JudgedOutputs(index=index).with_data(data))
