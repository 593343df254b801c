"""Verification in the worker process: each input set run through the reference and the candidate and compared,
outputs kept and checked for later writes, and the checks after the calls (repeatability, other sizes, the probes)."""

from __future__ import annotations

import time
import weakref
from typing import Any

from .probes import Probes
from .state import InputCase, Kept, Models, StageFailed, input_specs_of, task_constants


class Verification(Probes):
    """Verification (see the module's docstring)."""

    def verify(self, mod: Any, cand_mod: Any, cases: list[InputCase], models: Models) -> None:
        tol = self.task.tolerance_for
        per_init: dict[str, Models] = {repr((cases[0].init_inputs, [])): models}
        history: list[Kept] = []  # earlier input sets' candidate outputs
        self.verifying = True
        if self.is_cuda:
            # alone on the device: the probes hold the inputs back with a GPU-side sleep, which another process's
            # work would stretch (its time slices), letting a kernel that waits for nothing find them ready
            with self.cost("current_stream"), self.state.gate.exclusive():
                self.probe_streams(models, cases[0])

        skipped: list[str] = []
        budget = self.memory_budget()
        for i, case in enumerate(cases):
            if case.load():
                self.input_specs += input_specs_of([case], self.torch)
            # the candidate's copies of the task's constants follow them: reintegrated, both classes read
            # the same module's constants (a candidate may depend on them exactly as the reference does)
            shared = {k: v for k, v in case.overrides.items() if isinstance(getattr(cand_mod, k, None), int)}
            # the harness's own overrides of the task's constants, which the monkeypatch guard then expects
            self.overridden = {f"task module.{k}" for k in case.overrides}
            with (
                task_constants(mod, case.overrides),
                task_constants(cand_mod, shared),
                self.cost("other_sizes" if case.kind == "size" else "outputs_match"),
            ):
                try:
                    ref_out, cand_out, cand_in, m = self.run_case(i, case, mod, cand_mod, per_init)
                except StageFailed as sf:
                    self.overridden = set()
                    case.release()
                    if case.kind == "size" and self.task.vary_default and sf.reason.startswith("the reference"):
                        skipped.append(f"{case.name} ({sf.reason.removeprefix('the reference ')})")
                        continue  # a size forge chose that the module itself does not take
                    raise
            self.overridden = set()
            with self.cost("other_sizes" if case.kind == "size" else "outputs_match"):
                self.check_case(case, ref_out, cand_out, cand_in, history)
            del ref_out, cand_in
            case.release()
            history.append(Kept(case.name, cand_out))
            # earlier outputs are kept (to see whether later calls change them) while they fit the budget; the
            # latest is always kept, so a buffer reused by every call is still seen
            while len(history) > 1 and sum(h.nbytes for h in history) > budget:
                self.release_kept(history.pop(0))
            self.check_held()
        verified = [c for c in cases if not any(s.startswith(f"{c.name} (") for s in skipped)]
        self.input_specs = [s for s in self.input_specs if any(c.name == s.case for c in verified)]
        self.domain_sizes = list(dict.fromkeys("the task's own" if c.kind == "random" else c.name for c in verified))
        self.verify_after(cases, verified, skipped, history, per_init, tol)

    def run_case(
        self, i: int, case: InputCase, mod: Any, cand_mod: Any, per_init: dict[str, Models]
    ) -> tuple[Any, Any, list[Any], Models]:
        """Reference and candidate on one input set (alternating which goes first): their outputs."""
        from ..harness.checks import clone_inputs, same_bits, written_in_place
        from ..harness.compare import tensors_of

        key = repr((case.init_inputs, sorted(case.overrides.items())))
        if key not in per_init:
            per_init[key] = self.build_models(mod, cand_mod, case.init_inputs)
        m = per_init[key]
        ref_in, cand_in = clone_inputs(case.inputs), clone_inputs(case.inputs)
        if i % 2:
            written_in_place(cand_in)
        self.where = self.describe_set(case)

        def run_candidate() -> Any:
            out = self.call(m.cand, cand_in, "candidate", poisoned=True)
            if self.is_cuda:  # stream-ordered copy before the device-wide sync
                early = [t.clone() for t in tensors_of(out)]
                self.sync()
                late = tensors_of(out)
                if not all(same_bits(a, b) for a, b in zip(early, late, strict=False)):
                    self.check(
                        "stream_ordered",
                        False,
                        f"[{case.name}] outputs were still being written after the call returned on "
                        "the current stream: work on another stream is not joined to it",
                    )
            return out

        if i % 2 == 0:
            ref_out = self.call(m.ref, ref_in, "reference")
            self.sync()
            cand_out = run_candidate()
        else:
            try:
                cand_out = run_candidate()
            except StageFailed:
                if case.kind == "size":  # a size the module itself does not take is the reference's to say
                    self.call(m.ref, ref_in, "reference")
                raise
            ref_out = self.call(m.ref, ref_in, "reference")
            self.sync()
        return ref_out, cand_out, cand_in, m

    def release_kept(self, kept: Kept) -> None:
        """Stop keeping an earlier output (checked once more first), but keep watching it where the candidate still
        holds it: a weak reference and its digest. An honest candidate's output is gone once the harness drops it;
        one the candidate kept is a buffer it may write again (`check_held`)."""

        self.check_kept(kept)
        self.hold(kept.name, kept.out)

    def hold(self, name: str, out: Any) -> None:
        """Watch an output the harness does not keep (`release_kept`)."""
        from ..harness.checks import bits_digest
        from ..harness.compare import tensors_of

        self.held.append((name, [(weakref.ref(t), bits_digest(t)) for t in tensors_of(out)]))

    def check_held(self, when: str = "") -> None:
        """`no_result_reuse` for outputs the harness let go of: one the candidate still holds must not have changed
        since it was returned — a ring of output buffers, each handed out again a few calls later, however many
        calls later that is and whatever the outputs' size."""
        from ..harness.checks import bits_digest

        alive = []
        for name, refs in self.held:
            live = [(r, d) for r, d in refs if r() is not None]
            for r, d in live:
                t = r()
                if t is not None and bits_digest(t) != d:
                    self.check(
                        "no_result_reuse",
                        False,
                        f"[{name}] its output, which the candidate kept, changed after later calls{when}: output "
                        "buffers handed out again (a ring of buffers), so an earlier result does not stay a result",
                    )
            if live:
                alive.append((name, live))
        self.held = alive

    def check_kept(self, kept: Kept) -> None:
        """An earlier input set's output, kept since it was verified: its bits must not have changed since."""
        from ..harness.checks import bits_digest

        unchanged = bits_digest(kept.out) == kept.digest
        self.check(
            "no_result_reuse",
            unchanged,
            ""
            if unchanged
            else f"[{kept.name}] its output changed after later calls: the candidate reuses output memory or cached "
            "results across calls",
        )

    def check_case(self, case: InputCase, ref_out: Any, cand_out: Any, cand_in: list[Any], history: list[Any]) -> None:
        """The checks of one input set: inputs intact, no aliasing, plain outputs, the reference's values."""
        from ..harness.checks import aliased_outputs, bits_digest, changed_inputs
        from ..harness.compare import compare_outputs

        tol = self.task.tolerance_for
        changed = changed_inputs(case.inputs, cand_in)
        self.check(
            "inputs_unchanged",
            not changed,
            f"[{case.name}] the candidate modified input(s) {changed}" if changed else "",
        )
        aliased = aliased_outputs(cand_out, cand_in)
        self.check(
            "no_output_aliasing",
            not aliased,
            f"[{case.name}] {', '.join(aliased)} share memory with an input" if aliased else "",
        )
        self.check_plain_outputs(cand_out, case.name)
        self.check_dense_outputs(ref_out, cand_out, case.name)
        mismatch, _ = compare_outputs(ref_out, cand_out, tol, case.name)
        if mismatch is not None:
            now = bits_digest(cand_out)
            for prev in history:
                if now and prev.digest == now:
                    self.check(
                        "no_result_reuse",
                        False,
                        f"[{case.name}] returned the same result as for an earlier, different input",
                    )
            if case.kind == "size":
                self.check(
                    "other_sizes",
                    False,
                    f"[{case.name}] {mismatch.output}: {mismatch.detail} — correct at the task's own sizes "
                    "only (hard-coded shapes?)",
                    mismatch,
                )
            self.check("outputs_match", False, f"[{case.name}] {mismatch.output}: {mismatch.detail}", mismatch)

    def verify_after(
        self,
        cases: list[InputCase],
        verified: list[InputCase],
        skipped: list[str],
        history: list[Any],
        per_init: dict[str, Models],
        tol: Any,
    ) -> None:
        """The checks over all input sets: sizes, result reuse, repeatability, the probes."""
        from ..harness.checks import clone_inputs, same_bits
        from ..harness.compare import compare_outputs, tensors_of

        self.check("outputs_match", True, f"{len(verified)} input sets: " + ", ".join(c.name for c in verified))
        sizes = [c.name for c in verified if c.kind == "size"]
        detail = (
            ("verified at " + ", ".join(sizes) + (" (chosen by forge)" if self.task.vary_default else ""))
            if sizes
            else "not varied: " + self.unvaried_why(skipped)
        )
        if skipped:
            detail += "; skipped where the reference itself fails: " + "; ".join(skipped)
        self.check("other_sizes", True, detail)
        if self.is_cuda:
            self.check("stream_ordered", True, "outputs complete when the call returns on the current stream")

        # outputs of earlier calls must survive later calls (no shared output buffers / caches)
        for kept in history[:-1]:
            self.check_kept(kept)
        if len(history) < 2:
            self.check("no_result_reuse", True, "only one input set")
        while history:
            self.release_kept(history.pop(0))

        # repeated runs on the same input must agree (races, uninitialized reads): the first two with freed memory
        # poisoned, then more until `repeats` calls or `repeat_budget_s`, so that a race right on most calls (a lost
        # update on one call in six) shows whatever the timing budget leaves for the timed calls
        m = per_init[repr((cases[0].init_inputs, []))]
        outs: list[Any] = []
        mismatch, runs = None, 0
        with self.cost("repeatable"):
            t0 = time.perf_counter()
            while runs < 2 or (runs < self.opt.repeats and time.perf_counter() - t0 < self.opt.repeat_budget_s):
                out = self.call(m.cand, clone_inputs(cases[0].inputs), "candidate", poisoned=runs < 2)
                self.sync()
                runs += 1
                if not outs:
                    outs.append(out)
                    continue
                mismatch, _ = compare_outputs(outs[0], out, tol, f"{cases[0].name} (repeat {runs})")
                if mismatch is not None:
                    break
                if len(outs) < 2:
                    outs.append(out)
        bitwise = mismatch is None and all(
            same_bits(a, b) for a, b in zip(tensors_of(outs[0]), tensors_of(outs[1]), strict=False)
        )
        self.check(
            "repeatable",
            mismatch is None,
            f"{runs} runs on the same input disagree at {mismatch.output}: {mismatch.detail} (race or "
            "read of uninitialized memory?)"
            if mismatch
            else f"{runs} runs on the same input: "
            + ("bitwise identical" if bitwise else "equal within tolerance, not bitwise"),
        )
        with self.cost("trained_parameters"):
            self.probe_trained_parameters(m, cases[0])
        with self.cost("noncontiguous_inputs"):
            self.probe_layout(m, cases[0])
        with self.cost("input_range"):
            self.probe_range(m, cases[0])
        if self.opt.poison:
            self.check(
                "poisoned_memory",
                True,
                (
                    f"freed device memory filled with NaN before each candidate run "
                    f"(up to {getattr(self, '_poisoned', 0) / 2**20:.1f} MiB)"
                )
                if self.is_cuda
                else "best effort on CPU: NaN-filled chunks left in the allocator before each run",
            )
