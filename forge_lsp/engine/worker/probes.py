"""The probes of a verification, in the worker process: trained parameters, other layouts of the inputs, a wider
range of values, and whether the candidate's kernels wait for the caller's stream."""

from __future__ import annotations

import time
from typing import Any

from ..verdict import Narrowing
from .base import EvaluationBase
from .state import STICKY_ERRORS, InputCase, Models, StageFailed


class Probes(EvaluationBase):
    """The probes (see the module's docstring)."""

    def probe_trained_parameters(self, m: Models, case: InputCase) -> None:
        """Verify again with parameters drawn at each tensor's scale, loaded into reference and candidate alike:
        a term that vanishes at initialization (zero bias, unit scale) must still be computed."""
        from ..harness.checks import clone_inputs
        from ..harness.compare import compare_outputs
        from ..harness.probes import randomized_state_dict

        if not m.compatible:
            self.check(
                "trained_parameters",
                True,
                "not checked: the candidate does not load the reference's state_dict, so it cannot be given the "
                "same trained parameters (it cannot be reintegrated either)",
            )
            return
        original = {k: v.detach().clone() for k, v in m.ref.state_dict().items()}
        buffers = frozenset(name for name, _ in m.ref.named_buffers())
        trained = randomized_state_dict(original, self.task.seed + 7, buffers)
        try:
            m.ref.load_state_dict(trained, strict=True)
            m.cand.load_state_dict(trained, strict=True)
            if not trained:
                self.check("trained_parameters", True, "the module has no parameters or buffers")
                return
            ref_out = self.call(m.ref, clone_inputs(case.inputs), "reference")
            self.sync()
            cand_out = self.call(m.cand, clone_inputs(case.inputs), "candidate", poisoned=True)
            self.sync()
            mismatch, _ = compare_outputs(
                ref_out, cand_out, self.task.tolerance_for, f"{case.name}, trained parameters"
            )
            self.check(
                "trained_parameters",
                mismatch is None,
                f"with parameters other than the reference's initial ones, {mismatch.output}: {mismatch.detail} — "
                "the candidate relies on values the parameters have only at initialization (a zero bias, a unit "
                "scale), wrong for any trained weights"
                if mismatch
                else (
                    "1 tensor of the state_dict drawn at its own scale"
                    if len(trained) == 1
                    else f"{len(trained)} tensors of the state_dict drawn at their own scale"
                ),
                mismatch,
            )
        finally:
            m.ref.load_state_dict(original, strict=True)
            m.cand.load_state_dict(original, strict=True)

    def probe_layout(self, m: Models, case: InputCase) -> None:
        """The same values in non-contiguous tensors (a strided view, and a dense column-major layout), where the
        reference accepts them. The task's own inputs are contiguous: a candidate wrong there (it indexes raw memory
        as if contiguous) or refusing them is verified for contiguous inputs only, and the verdict's domain says so
        (with `EvalOptions.strict`, wrong values there fail the check). Both layouts right: any layout."""
        from ..harness.compare import compare_outputs
        from ..harness.loading import call_model
        from ..harness.probes import LAYOUTS

        torch = self.torch
        notes = []
        any_layout = True

        def own(laid: list[Any]) -> list[Any]:
            """Inputs in a layout; a tensor the layout leaves as is (a vector) is cloned, never handed out."""
            return [
                y.clone() if isinstance(y, torch.Tensor) and y is x else y
                for x, y in zip(case.inputs, laid, strict=True)
            ]

        laid_out = 0
        for layout, relaid in LAYOUTS.items():
            laid = [relaid(x) for x in case.inputs]
            if all(y is x for x, y in zip(case.inputs, laid, strict=True)):
                continue
            laid_out += 1
            try:
                ref_out = call_model(m.ref, own(laid))
                self.sync()
            except Exception:  # noqa: BLE001 - the reference does not take them: nothing to hold the candidate to
                notes.append(f"{layout}: not checked, the reference does not accept it")
                any_layout = False
                continue
            del laid
            cand_in = own([relaid(x) for x in case.inputs])
            self.where = self.describe_set(case, cand_in, f"a {layout} copy")
            try:
                cand_out = self.call(m.cand, cand_in, "candidate", poisoned=True)
                self.sync()
            except StageFailed as sf:
                if sf.failed_check or (self.is_cuda and any(t in sf.reason for t in STICKY_ERRORS)):
                    raise  # a check of its own failed, or the device is gone: not a refusal
                any_layout = False
                detail = f"{layout}: the candidate refuses it ({sf.reason})"
                notes.append(detail)
                self.narrowed.append(
                    Narrowing(
                        check="noncontiguous_inputs",
                        axis="layouts",
                        found="refused",
                        detail=detail,
                        repair="contiguous_inputs",
                    )
                )
                continue
            mismatch, _ = compare_outputs(ref_out, cand_out, self.task.tolerance_for, f"{case.name}, {layout}")
            del ref_out, cand_out, cand_in
            if mismatch is not None:
                self.narrow(
                    "noncontiguous_inputs",
                    "layouts",
                    "wrong_values",
                    f"with the same values in {layout} tensors, {mismatch.output}: {mismatch.detail} — the candidate "
                    "assumes a contiguous layout without checking it (call .contiguous(), or pass strides): verified "
                    "for contiguous inputs only",
                    "contiguous_inputs",
                    mismatch,
                )
                return
            notes.append(f"{layout}: correct")
        self.layouts = "any" if any_layout else "contiguous"
        if not laid_out:
            notes.append("no tensor input to lay out differently")
        if not any_layout:
            notes.append("verified for contiguous inputs only")
        self.check("noncontiguous_inputs", True, "; ".join(notes))

    def probe_range(self, m: Models, case: InputCase) -> None:
        """Inputs scaled up (while the reference's output stays finite): intermediates that overflow a narrow
        dtype for values larger than the task's random inputs show here."""
        from ..harness.checks import clone_inputs
        from ..harness.compare import compare_outputs, tensors_of
        from ..harness.probes import scaled_copy

        if not any(isinstance(x, self.torch.Tensor) and x.is_floating_point() for x in case.inputs):
            self.check("input_range", True, "no floating-point input to scale")
            return
        kinds = self.task.input_kinds
        scalable = [k == "normal" for k in kinds] if kinds is not None and len(kinds) == len(case.inputs) else []
        if not any(scalable):
            self.check(
                "input_range",
                True,
                "not checked: no input is drawn from torch.randn (scaling another kind of input would take it out of "
                "the task's distribution)",
            )
            return
        for factor in (16.0, 4.0):
            scaled = [scaled_copy(x, factor) if up else x for x, up in zip(case.inputs, scalable, strict=True)]
            try:
                ref_out = self.call(m.ref, clone_inputs(scaled), "reference")
                self.sync()
            except StageFailed:
                self.check("input_range", True, "not checked: the reference fails for scaled inputs")
                return
            outs = tensors_of(ref_out)
            if outs and all(bool(self.torch.isfinite(t).all()) for t in outs if t.is_floating_point()):
                break
        else:
            self.check("input_range", True, "not checked: the reference's output is not finite for scaled inputs")
            return
        cand_in = clone_inputs(scaled)
        del scaled
        self.where = self.describe_set(case, cand_in, f"inputs x{factor:g}")
        cand_out = self.call(m.cand, cand_in, "candidate", poisoned=True)
        self.sync()
        mismatch, _ = compare_outputs(ref_out, cand_out, self.task.tolerance_for, f"{case.name}, inputs x{factor:g}")
        self.check(
            "input_range",
            mismatch is None,
            f"with the inputs scaled by {factor:g}, {mismatch.output}: {mismatch.detail} — intermediates overflow or "
            "lose precision for values larger than the task's random inputs (accumulate in a wider dtype)"
            if mismatch
            else f"correct with the inputs scaled by {factor:g}",
            mismatch,
        )

    #: the stream probes' GPU-side delay: `PROBE_DELAY_CALLS` times the candidate's longest call on the host (what its
    #: code takes to launch its kernels), within these bounds in ms
    PROBE_DELAY_MS = (10.0, 50.0)

    PROBE_DELAY_CALLS = 50

    def probe_delay_ms(self, m: Models, case: InputCase) -> float:
        """How long the stream probes hold the inputs back: far longer than the candidate's own host code takes to reach
        its kernels (a warm call, timed on the host without waiting for the device), so a kernel that does not wait
        for the stream is launched, and reads the placeholders, well inside the delay."""
        from ..harness.checks import clone_inputs

        inputs = clone_inputs(case.inputs)
        self.sync()
        t0 = time.perf_counter()
        self.call(m.cand, inputs, "candidate")
        host_ms = (time.perf_counter() - t0) * 1e3
        self.sync()
        lo, hi = self.PROBE_DELAY_MS
        return min(hi, max(lo, self.PROBE_DELAY_CALLS * host_ms))

    #: the longest delay a stream probe tries (ms), and how many times it tries
    PROBE_DELAY_MAX_MS = 2000.0
    PROBE_TRIES = 3
    #: the share of the delay within which the candidate's call must have returned on the host
    PROBE_IN_TIME = 0.8
    #: `current_stream`'s word when the candidate's kernels were launched after the probe's delay, every try
    LAUNCHED_LATE = (
        "not decided: the host was too busy to launch the candidate's kernels within the probe's delay; verified on "
        "the default stream only"
    )

    def delayed_call(self, model: Any, case: InputCase, stream: Any, delay_ms: float = 50.0) -> tuple[Any, bool]:
        """`model` called on `stream` (made current) with inputs that become ready only after a GPU-side delay on that
        stream: NaN placeholders, then a `delay_ms` sleep, then the real values. Kernels that wait for work queued on the
        stream read the real values; kernels on a stream that does not wait for it read the placeholders.

        That holds only where the candidate's call returned (its kernels launched) before the delay ran out: on a host
        too busy for that (other processes on its cores), a kernel that waits for nothing would find the real values
        too. So the call is timed on the host, and tried again with a longer delay while it came too late: (its
        output, whether the last try's call returned within the delay)."""
        from ..harness import timing as T
        from ..harness.checks import clone_inputs

        torch = self.torch
        cycles_per_ms = T.CudaTimer(self.device, False).cycles_per_ms
        out, in_time = None, False
        for _ in range(self.PROBE_TRIES):
            del out
            delayed = clone_inputs(case.inputs)
            self.sync()
            with torch.cuda.stream(stream):
                for x in delayed:
                    if isinstance(x, torch.Tensor) and x.is_floating_point():
                        x.fill_(float("nan"))
                t0 = time.perf_counter()
                torch.cuda._sleep(int(delay_ms * cycles_per_ms))
                for x, real in zip(delayed, case.inputs, strict=True):
                    if isinstance(x, torch.Tensor) and x.is_floating_point():
                        x.copy_(real)
                out = self.call(model, delayed, "candidate")
                host_ms = (time.perf_counter() - t0) * 1e3
            self.sync()
            in_time = host_ms < self.PROBE_IN_TIME * delay_ms
            if in_time or delay_ms >= self.PROBE_DELAY_MAX_MS:
                break
            delay_ms = min(self.PROBE_DELAY_MAX_MS, 4 * host_ms)
        return out, in_time

    def probe_streams(self, m: Models, case: InputCase) -> None:
        """Whether the candidate's kernels wait for the work queued before the call, on two streams.

        1. `stream_ordered`, in the task's own conditions: the inputs are made ready by work queued on the device's
           default stream (the current one) after a delay. Kernels on that stream (the legacy default stream
           included) or on one joined to it wait; kernels on a non-blocking stream of their own that is never joined
           read the placeholders: their outputs are not ordered after the caller's work, a race wherever they run.
        2. `current_stream`: the same on a side stream made current, as `torch.cuda.stream(...)`, CUDA-graph capture
           and `torch.compile(mode="reduce-overhead")` run a module. Kernels on the legacy default stream
           (`<<<grid, block>>>` with no stream) read the placeholders: verified on the default stream only (the
           domain says so; with `EvalOptions.strict` the check fails)."""
        from ..harness.checks import clone_inputs
        from ..harness.compare import compare_outputs

        torch = self.torch
        if not any(isinstance(x, torch.Tensor) and x.is_floating_point() for x in case.inputs):
            self.check(
                "current_stream",
                True,
                "not checked: no floating-point input to delay; verified on the default stream only",
            )
            return
        ref_out = self.call(m.ref, clone_inputs(case.inputs), "reference")
        self.sync()
        delay = self.probe_delay_ms(m, case)
        self.where = self.describe_set(case, what="inputs made ready on the default stream after a delay")
        own, in_time = self.delayed_call(m.cand, case, torch.cuda.current_stream(self.device), delay)
        mismatch, _ = compare_outputs(ref_out, own, self.task.tolerance_for, f"{case.name}, delayed on its stream")
        del own
        if mismatch is None and not in_time:  # right, but launched after the inputs were ready: nothing shown
            self.check("current_stream", True, self.LAUNCHED_LATE)
            return
        if mismatch is not None and self.right_when_ready(m, case, ref_out):
            self.check(
                "stream_ordered",
                False,
                f"{mismatch.output}: {mismatch.detail} — with the inputs made ready by work queued on the caller's "
                "stream after a delay, the candidate read them before they were ready: its kernels run on a stream "
                "of their own that does not wait for the caller's (join it: side.wait_stream(current) before the "
                "kernels, current.wait_stream(side) after)",
                mismatch,
            )
        elif mismatch is not None:
            # wrong with ready inputs too: a candidate wrong throughout (outputs_match says so next), or one whose
            # output races with the caller's stream (work on a stream of its own, read back unjoined): then some
            # calls with ready inputs come out right
            if any(self.right_when_ready(m, case, ref_out) for _ in range(3)):
                self.check(
                    "stream_ordered",
                    False,
                    f"{mismatch.output}: {mismatch.detail} — with the inputs made ready by work queued on the caller's "
                    "stream after a delay the output was wrong, and with ready inputs it is right on some calls only: "
                    "its work runs on a stream of its own, not ordered with the caller's (join it: "
                    "side.wait_stream(current) before the kernels, current.wait_stream(side) after)",
                    mismatch,
                )
            self.check("current_stream", True, "not decided: the output is wrong with ready inputs too")
            return
        self.where = self.describe_set(case, what="inputs made ready on a side stream after a delay")
        side, in_time = self.delayed_call(m.cand, case, torch.cuda.Stream(self.device), delay)
        mismatch, _ = compare_outputs(ref_out, side, self.task.tolerance_for, f"{case.name}, delayed stream")
        del side
        if mismatch is None and not in_time:  # right, but launched after the side stream's work was done
            self.check("current_stream", True, self.LAUNCHED_LATE)
            return
        if mismatch is None:
            self.streams = "any"
            self.check("current_stream", True, "waits for work queued on torch's current stream, whichever it is")
            return
        self.narrow(
            "current_stream",
            "streams",
            "wrong_values",
            f"{mismatch.output}: {mismatch.detail} — with the inputs made ready on a side stream after a delay, the "
            "candidate read them before they were ready: its kernels do not run on the current stream (the legacy "
            "default stream: `<<<grid, block>>>` with no stream). Right on the default stream only; launch on "
            "at::cuda::getCurrentCUDAStream() in C++ / torch.cuda.current_stream() in Python",
            "current_stream",
            mismatch,
        )

    def right_when_ready(self, m: Models, case: InputCase, ref_out: Any) -> bool:
        """Whether the candidate is right on the same inputs made ready before the call: then a stream probe's wrong
        output is the stream's doing."""
        from ..harness.checks import clone_inputs
        from ..harness.compare import compare_outputs

        plain = self.call(m.cand, clone_inputs(case.inputs), "candidate")
        self.sync()
        return compare_outputs(ref_out, plain, self.task.tolerance_for, case.name)[0] is None
