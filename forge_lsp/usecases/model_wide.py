"""Use case: optimize a whole model (`forge optimize ENTRY --model-wide`).

1. Its hot spots, with the hot module classes captured and extracted as tasks (`usecases.hotspots`).
2. Each extracted task optimized in turn with its captured inputs (`usecases.optimize.ModuleOptimization`:
   the offline candidates, and the model's when one is configured); a run's answer (verified, re-checked,
   faster after re-timing) becomes a patch for the instances the task was captured from.
3. The whole model checked end to end with the patches in place (`hotspots.verify.check_model`): outputs
   against the original's on the entry's inputs, per-dtype tolerances; a patch that makes them differ is
   reverted and said; then the forward timed with and without, alternating, in rounds until the speedup's 99%
   interval decides (`hotspots.decide`): kept only above 1; undecided at the time budget, nothing is kept and the
   result is "inconclusive" with the timing noise. A model that would be slower is never patched.
4. The kept patches written as ``.forge/model_wide/<run>/forge_patch.py`` (``apply(model)``) for the user to
   import: the model's own code is not edited.

Every run, whatever its outcome, leaves ``.forge/model_wide/<run>/result.json`` (`ModelWideResult.to_json`):
the hot-spot report, each module's outcome and run id in the run store, the end-to-end check and the patch
file. `load_model_wide_results` reads them back, newest first, for reports and the editor.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine.task import DEFAULT_TOLERANCES
from ..hotspots import HotspotReport, parse_entry
from ..hotspots.patching import MODEL_MODES as MODEL_MODES
from ..hotspots.patching import mode_error as mode_error
from ..hotspots.verify import ModelCheck, ModelCheckError, check_model, write_patch_file
from .common import UseCaseError
from .hotspots import EntryFailed, HotspotsRequest, find_model_hotspots

if TYPE_CHECKING:
    from ..agent.progress import RunProgress
    from ..agent.store import EventRecord
    from .optimize import ModuleOptimization, OptimizeResult

#: whole-model modes tried on top of the kept replacements when none are asked for (offline candidates on): on a
#: GPU the forward compiled whole (with and without CUDA graphs), channels_last (alone, compiled, and replayed as CUDA
#: graphs; convolutional models only), replayed as CUDA graphs without compiling, and the hot blocks compiled one by
#: one; on the CPU the forward compiled and channels_last. A compile that leaves eager's accuracy on a bf16/fp16
#: model is tried again keeping eager's roundings ("+eager_casts", `hotspots.model_check`)
GPU_MODES = (
    "default",
    "reduce-overhead",
    "channels_last",
    "channels_last+default",
    "cuda_graphs",
    "channels_last+cuda_graphs",
    "blocks",
)
CPU_MODES = ("default", "channels_last")


@dataclass(frozen=True)
class ModelWideRequest:
    entry: str | None = None
    workspace: Path | None = None
    device: str = "auto"
    top: int = 3
    overrides: dict[str, Any] = field(default_factory=dict)  # configuration keys for each module's run
    offline: bool = True
    reps: int = 30  # end-to-end timings, each way, in the first round
    #: seconds the end-to-end timing may go on while its interval holds 1 (more rounds of forwards), per decision
    timing_budget_s: float = 30.0
    cache_dir: Path | None = None
    #: whole-model modes tried with the kept replacements in place (`hotspots.patching.compile_model`: torch.compile
    #: modes, channels_last, cuda_graphs, blocks, or several joined with "+"), each checked end to end like them;
    #: None: `GPU_MODES` or `CPU_MODES` when offline (else none)
    model_modes: tuple[str, ...] | None = None
    #: seconds each hot module's run may take: at the budget its run is stopped (its worker killed) and the module
    #: is left as it is, said as "over_budget"; None: no limit
    module_budget_s: float | None = None
    #: an interrupted model-wide run to go on with (its folder's name under .forge/model_wide, or "latest"): its hot
    #: spots and its finished modules are taken as they are, the rest is run
    resume: str | None = None


@dataclass
class ModuleOutcome:
    cls: str  # class key
    name: str
    total_pct: float  # of the model's time
    task: Path | None = None
    run_id: str | None = None
    speedup: float | None = None  # the module's, final re-timing on its captured inputs
    #: "kept", "reverted", "not_faster", "not_extracted", "not_replaceable", "failed", "over_budget"
    status: str = "skipped"
    reason: str = ""
    instances: list[str] = field(default_factory=list)
    #: the class's other instances (built or called differently) the answer was carried over to and kept
    carried: list[str] = field(default_factory=list)
    not_carried: list[str] = field(default_factory=list)  # why, per variant not carried over or reverted
    candidate_id: str | None = None  # the answer, in its run
    source_file: str | None = None  # the answer's source, as the patch installs it
    domain: dict[str, Any] | None = None  # what the answer was verified on (`VerifiedDomain`)
    seconds: float | None = None  # how long the module's run took


@dataclass
class ModelWideResult:
    report: HotspotReport
    modules: list[ModuleOutcome]
    check: ModelCheck | None = None  # None when no module had a faster candidate
    patch_file: Path | None = None
    notes: list[str] = field(default_factory=list)
    folder: Path | None = None  # .forge/model_wide/<run>/, where result.json is
    report_workspace: Path | None = None  # the workspace the run was in
    created: float = field(default_factory=time.time)
    #: "finished", or "interrupted" (Ctrl-C, SIGTERM, a cancel): what finished is kept, `--resume` goes on
    state: str = "finished"
    #: the patches of the modules kept so far (before the end-to-end check), for a resumed run to go on with
    patches: list[dict[str, Any]] = field(default_factory=list)
    top: int = 0  # how many hot classes the run optimizes

    @property
    def outcome(self) -> str:
        """'kept' (a patch was written), 'inconclusive' (nothing kept: the timing could not decide), 'nothing_kept',
        or 'interrupted' (stopped before the end: resume it)."""
        if self.state == "interrupted":
            return "interrupted"
        if self.patch_file is not None:
            return "kept"
        if self.check is not None and self.check.outcome == "inconclusive":
            return "inconclusive"
        return "nothing_kept"

    def to_json(self) -> dict[str, Any]:
        return {
            "version": RESULT_VERSION,
            "state": self.state,
            "outcome": self.outcome,
            "patches": self.patches,
            "top": self.top,
            "created": self.created,
            "report": self.report.model_dump(mode="json"),
            "modules": [{**asdict(m), "task": str(m.task) if m.task else None} for m in self.modules],
            "check": self.check.model_dump(mode="json") if self.check is not None else None,
            "patch_file": str(self.patch_file) if self.patch_file else None,
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], folder: Path | None = None) -> ModelWideResult:
        known = {f.name for f in fields(ModuleOutcome)}
        modules = [
            ModuleOutcome(
                **{k: v for k, v in m.items() if k in known} | {"task": Path(m["task"]) if m.get("task") else None}
            )
            for m in data["modules"]
        ]
        return cls(
            report=HotspotReport.model_validate(data["report"]),
            modules=modules,
            check=ModelCheck.model_validate(data["check"]) if data.get("check") else None,
            patch_file=Path(data["patch_file"]) if data.get("patch_file") else None,
            notes=list(data.get("notes", [])),
            folder=folder,
            created=float(data.get("created", 0.0)),
            state=str(data.get("state", "finished")),
            patches=list(data.get("patches", [])),
            top=int(data.get("top", len(modules))),
        )


RESULT_VERSION = 1


def _save(result: ModelWideResult, workspace: Path) -> ModelWideResult:
    folder = result.folder or _run_folder(workspace)
    folder.mkdir(parents=True, exist_ok=True)
    result.folder = folder
    tmp = folder / "result.json.tmp"
    tmp.write_text(json.dumps(result.to_json(), indent=1))
    tmp.replace(folder / "result.json")
    return result


def _run_folder(workspace: Path) -> Path:
    base = workspace / ".forge" / "model_wide"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    folder, n = base / stamp, 1
    while folder.exists():
        n += 1
        folder = base / f"{stamp}-{n}"
    return folder


def load_model_wide_results(workspace: Path) -> list[ModelWideResult]:
    """The model-wide runs of a workspace, newest first; a result.json that cannot be read is left out."""
    out = []
    for path in (workspace / ".forge" / "model_wide").glob("*/result.json"):
        try:
            out.append(ModelWideResult.from_json(json.loads(path.read_text()), folder=path.parent))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return sorted(out, key=lambda r: r.created, reverse=True)


Say = Callable[[str], None]
Progress = Callable[[str, int], None]  # a line of what the run does, and how far the whole run is (0-99)

#: a module outcome that a resumed run takes as it is
FINISHED = frozenset({"kept", "not_faster", "not_extracted", "not_replaceable", "failed", "over_budget"})


class RunInterrupted(EntryFailed):
    """The model-wide run was stopped from outside (a cancel, Ctrl-C, SIGTERM): what finished is saved in `result`
    (state "interrupted"), the module run in flight is marked interrupted in the run store, and the run goes on
    with `ModelWideRequest(resume=result.folder.name)`."""

    def __init__(self, result: ModelWideResult) -> None:
        assert result.folder is not None
        done = sum(1 for m in result.modules if m.status in FINISHED)
        super().__init__(
            f"interrupted: {done} of {result.top} hot module(s) finished and saved; resume with "
            f"`forge optimize --model-wide --resume {result.folder.name}`"
        )
        self.result = result


def _resumed(request: ModelWideRequest, workspace: Path) -> ModelWideResult:
    """The interrupted run `request.resume` names (or the latest one), as saved."""
    runs = [r for r in load_model_wide_results(workspace) if r.state == "interrupted"]
    if request.resume != "latest":
        runs = [r for r in runs if r.folder is not None and r.folder.name == request.resume]
    if not runs:
        raise UseCaseError(
            f"no interrupted model-wide run {request.resume!r} under {workspace / '.forge' / 'model_wide'}"
            + " (finished runs are not resumed: start a new one)"
        )
    return runs[0]


def optimize_model(
    request: ModelWideRequest,
    *,
    say: Say | None = None,
    cancel: threading.Event | None = None,
    on_progress: Progress | None = None,
) -> ModelWideResult:
    """Raises `UseCaseError` for a request that cannot run (`EntryFailed` when the entry itself fails).
    `say` gets each line of what the run does; `on_progress` the same line with how far the whole run is (0-99:
    the hot spots to 15, each hot module an equal share to 85, then the end-to-end check)."""
    from .optimize import ModuleOptimization, OptimizeRequest

    pct = [0]

    def tell(text: str) -> None:
        if say is not None:
            say(text)
        if on_progress is not None:
            on_progress(text, pct[0])

    def hot_step(step: str, done: int | None, of: int | None) -> None:
        pct[0] = max(pct[0], 2 + (13 * done // of if done is not None and of else 0))
        tell(f"hot spots: {step}" + (f" {done}/{of}" if done and of else ""))

    prior: ModelWideResult | None = None
    if request.resume:
        from ..hotspots.extract import extract_tasks
        from .common import find_workspace

        workspace = request.workspace or find_workspace(Path.cwd())
        prior = _resumed(request, workspace)
        report, top = prior.report, prior.top or request.top
        assert prior.folder is not None
        tell(f"resuming {prior.folder.name}: {sum(m.status in FINISHED for m in prior.modules)} module(s) finished")
        hot_entry = None
        extraction = extract_tasks(report, workspace)
    else:
        hot = find_model_hotspots(
            HotspotsRequest(
                entry=request.entry,
                workspace=request.workspace,
                device=request.device,
                top=request.top,
                extract=True,
                cache_dir=request.cache_dir,
            ),
            on_progress=hot_step,
            cancel=cancel,
        )
        report, workspace, hot_entry = hot.report, hot.workspace, hot.entry
        top = min(request.top, len(report.targets))  # the hot modules this run optimizes
        assert hot.extraction is not None
        extraction = hot.extraction
    tasks = {t.cls: t for t in extraction.tasks}
    skipped = dict(extraction.skipped)
    done = {m.cls: m for m in prior.modules if m.status in FINISHED} if prior is not None else {}
    modules: list[ModuleOutcome] = []
    patches: list[dict[str, Any]] = [p for p in prior.patches if p["cls"] in done] if prior is not None else []
    out = ModelWideResult(
        report=report,
        modules=modules,
        folder=prior.folder if prior is not None else _run_folder(workspace),
        report_workspace=workspace,
        top=top,
        patches=patches,
    )

    def interrupted(mo: ModuleOutcome | None = None, run: Any = None) -> RunInterrupted:
        """Save what finished (the module in flight marked, its run too) and say how to go on."""
        if mo is not None:
            mo.status, mo.reason = "interrupted", "stopped from outside; resume to run it again"
        if run is not None and getattr(run, "run_id", None):
            run.store.set_run_status(run.run_id, "interrupted", "the model-wide run was interrupted")
        for key in report.targets[len(modules) : top]:  # the ones not reached
            c = report.cls(key)
            if c is not None:
                modules.append(ModuleOutcome(cls=key, name=c.name, total_pct=c.total_pct, status="interrupted"))
        out.state = "interrupted"
        out.notes.append("interrupted before the end-to-end check: nothing is patched yet")
        return RunInterrupted(_save(out, workspace))

    for i, key in enumerate(report.targets[:top]):
        c = report.cls(key)
        assert c is not None
        pct[0] = max(pct[0], 15 + 70 * i // max(top, 1))
        if key in done:
            modules.append(done[key])
            tell(f"{c.name}: {done[key].status} (finished before the interruption)")
            continue
        mo = ModuleOutcome(cls=key, name=c.name, total_pct=c.total_pct)
        modules.append(mo)
        task = tasks.get(key)
        if task is None:
            mo.status, mo.reason = "not_extracted", skipped.get(key, "no task was extracted")
            continue
        mo.task, mo.instances = task.path, task.instances
        captured = next((i.capture for i in report.instances if i.name == task.instances[0]), None)
        if captured is None or (captured.output != "tensor" and captured.output_spec is None):
            mo.status = "not_replaceable"
            mo.reason = f"its calls return a {captured.output if captured else '?'}, which cannot be rebuilt"
            continue
        if cancel is not None and cancel.is_set():
            raise interrupted(mo)
        tell(f"optimizing {c.name} ({c.total_pct:.1f}% of the model) on its captured inputs")
        relay = _Relay(c.name, tell, request.module_budget_s)
        run = None
        try:
            run = ModuleOptimization(
                OptimizeRequest(
                    task_file=task.path,
                    workspace=workspace,
                    overrides=request.overrides,
                    device=report.device,
                    offline=request.offline,
                    cache_dir=request.cache_dir,
                ),
                on_event=relay,
            )
            result = relay.run(run, cancel)
            if cancel is not None and cancel.is_set():
                raise interrupted(mo, run)
        except RunInterrupted:
            raise
        except UseCaseError as exc:
            if cancel is not None and cancel.is_set():
                raise interrupted(mo, run) from None
            mo.status, mo.reason, mo.seconds = "failed", str(exc), relay.seconds()
            continue
        mo.run_id, mo.seconds = result.run_id, relay.seconds()
        if relay.over_budget and result.answer is None:  # stopped at the budget, whatever phase it was in
            mo.status = "over_budget"
            mo.reason = (
                f"its run was stopped at the module budget ({request.module_budget_s:g} s), "
                f"{relay.progress.message() if relay.progress else 'before it started'}"
            )
            tell(
                f"  {c.name}: stopped at the module budget ({request.module_budget_s:g} s); the module is left as it is"
            )
            continue
        if result.answer is None:
            mo.status, mo.reason = "not_faster", result.message
            continue
        mo.speedup = result.answer.speedup
        folder = workspace / ".forge" / "model_wide" / "candidates"
        folder.mkdir(parents=True, exist_ok=True)
        source = folder / f"{result.run_id}_{c.name}.py"
        source.write_text(result.answer.candidate.source)
        mo.candidate_id, mo.source_file = result.answer.candidate.id, str(source)
        mo.domain = result.answer.domain.model_dump(mode="json")
        patches.append(_patch(key, key, task.instances, source, captured, mo.domain))
        main_text = task.path.read_text().rstrip()
        for variant in task.variants:
            label = f"{key}@{variant.path.stem}"
            carried = carry_over(result.answer.candidate.source, main_text, variant.path.read_text())
            v_capture = next((i.capture for i in report.instances if i.name == variant.instances[0]), None)
            if carried is None or v_capture is None or (v_capture.output != "tensor" and v_capture.output_spec is None):
                why = (
                    "its source is not the task's plus a ModelNew" if carried is None else "its calls cannot be rebuilt"
                )
                mo.not_carried.append(f"{', '.join(variant.instances)}: not carried over ({why})")
                continue
            v_source = folder / f"{result.run_id}_{variant.path.stem}.py"
            v_source.write_text(carried)
            patches.append(
                _patch(key, label, variant.instances, v_source, v_capture, carried_domain(mo.domain, v_capture))
            )
        mo.status, mo.reason = "kept", f"{result.answer.label} on its captured inputs"
    modes = request.model_modes
    if modes is None:
        modes = (GPU_MODES if report.device.startswith("cuda") else CPU_MODES) if request.offline else ()
    blocks = tuple(i.name for i in report.instances if i.cls in report.targets[:top])
    if not patches:
        out.notes.append("no hot module got a verified candidate faster than its reference")
        if not modes:
            out.notes[-1] += ": the model is unchanged"
            return _save(out, workspace)
    if cancel is not None and cancel.is_set():
        raise interrupted()
    pct[0] = max(pct[0], 85)
    tell(
        f"checking the whole model with {len(patches)} replacement(s)"
        + (f", then compiled whole ({', '.join(modes)})" if modes else "")
    )
    entry = hot_entry or parse_entry(report.entry, workspace)
    tolerances = {k: [t.atol, t.rtol] for k, t in DEFAULT_TOLERANCES.items()}
    try:
        check = check_model(
            entry,
            workspace,
            report.device,
            patches,
            tolerances,
            reps=request.reps,
            timing_budget_s=request.timing_budget_s,
            cancel=cancel,
            cache_dir=request.cache_dir,
            model_modes=tuple(modes),
            root=report.model,
            blocks=blocks,
        )
    except ModelCheckError as exc:
        if cancel is not None and cancel.is_set():
            raise interrupted() from None
        out.notes.append(f"the end-to-end check failed: {exc}")
        _save(out, workspace)
        raise EntryFailed(str(exc)) from exc
    out.check = check
    reverted_why = {r.cls: r.why for r in check.reverted}
    for mo in modules:
        if mo.status == "kept" and mo.cls in reverted_why:
            mo.status, mo.reason = "reverted", reverted_why[mo.cls]
        for p in patches:
            if p["cls"] != mo.cls or p["label"] == mo.cls:
                continue
            if p["label"] in reverted_why:
                mo.not_carried.append(f"{', '.join(p['instances'])}: reverted ({reverted_why[p['label']]})")
            elif p["label"] in check.kept:
                mo.carried += p["instances"]
    kept = [p for p in patches if p["label"] in check.kept]
    if check.outcome == "inconclusive" and not check.model_mode:
        said = (check.decision or {}).get("noise_pct")
        out.notes.append(
            "inconclusive: the end-to-end timing could not decide"
            + (f" (timing noise of {said:.0f}%)" if said is not None else "")
            + " within its budget; nothing is kept (time again on a quieter machine, or raise timing_budget_s)"
        )
    elif patches and not kept and not check.model_mode_alone:
        out.notes.append("no replacement survived the end-to-end check")
    if check.model_mode_alone:
        out.notes.append(
            f"the whole model is put in mode {check.model_mode!r} ({mode_says(check.model_mode or '')}) without the "
            "replacements: the end-to-end check found it faster than the replacements, alone or under it"
        )
    elif check.model_mode:
        out.notes.append(
            f"the whole model is put in mode {check.model_mode!r} ({mode_says(check.model_mode)}) on top"
            + (" of the replacements" if kept else "")
            + ": the end-to-end check found it faster"
        )
    if kept or check.model_mode:
        assert out.folder is not None
        chosen_blocks = tuple(check.model_blocks) if check.model_blocks is not None else blocks
        out.patch_file = write_patch_file(out.folder, entry, kept, check.model_mode, chosen_blocks)
    else:
        out.notes.append("the model is unchanged")
    return _save(out, workspace)


class _Relay:
    """A module's run, said as it goes (its events through `RunProgress`, a line when the line changes), with
    the caller's cancel passed on to it (its worker is killed), and stopped the same way at its time budget."""

    def __init__(self, name: str, tell: Say, budget_s: float | None = None) -> None:
        self.name, self.tell, self.budget_s = name, tell, budget_s
        self.progress: RunProgress | None = None
        self.said = ""
        self.started = time.monotonic()
        self.over_budget = False

    def seconds(self) -> float:
        return round(time.monotonic() - self.started, 1)

    def __call__(self, record: EventRecord) -> None:
        if self.progress is not None and self.progress.update(record.event):
            line = self.progress.message()
            if line != self.said:
                self.said = line
                self.tell(f"  {self.name}: {line} ({time.monotonic() - self.started:.0f} s)")

    def run(self, run: ModuleOptimization, cancel: threading.Event | None) -> OptimizeResult:
        self.progress = run.progress()
        stop = threading.Event()

        def relay() -> None:
            while not stop.is_set():
                if cancel is not None and cancel.is_set():
                    run.cancel()
                    return
                if self.budget_s is not None and time.monotonic() - self.started >= self.budget_s:
                    self.over_budget = True
                    run.cancel()
                    return
                stop.wait(0.2)

        watcher = threading.Thread(target=relay, daemon=True)
        watcher.start()
        try:
            return run.run()
        finally:
            stop.set()
            watcher.join()


def _patch(
    key: str, label: str, instances: list[str], source: Path, captured: Any, domain: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A patch for `patching.install`; `domain`: the `VerifiedDomain` (JSON) its calls must be inside to reach the
    candidate (None: matched by the captured call's shape alone)."""
    patch = {
        "cls": key,
        "label": label,
        "instances": instances,
        "source_file": str(source),
        "call": [a.model_dump() for a in captured.call],
        "output": captured.output,
        "output_spec": captured.output_spec,
    }
    if domain is not None:
        patch["domain"] = domain
    return patch


def carried_domain(domain: dict[str, Any] | None, captured: Any) -> dict[str, Any] | None:
    """The domain of an answer carried over to another variant of its class: the answer's own (device types,
    dtypes, layouts, streams: the same code), with the variant's captured call as its only verified sizes (the
    end-to-end check is the one check the variant gets, on that call)."""
    if domain is None:
        return None
    shapes = [list(t.shape) for t in captured.inputs]
    return dict(domain, ranks=[len(s) for s in shapes], sizes=[[[n] for n in s] for s in shapes])


def carry_over(candidate: str, task_text: str, variant_text: str) -> str | None:
    """The candidate for another variant of its class: a candidate that is the task's source plus its own part
    (``ModelNew``, as forge's offline candidates are) gets the variant's task in place of the task; None for
    one written otherwise (it may hold the task's shapes anywhere)."""
    if not candidate.startswith(task_text):
        return None
    return variant_text.rstrip() + candidate[len(task_text) :]


NOT_A_SUBCLASS = "the answer is not the task's source plus a ModelNew: it may hold the task's own sizes"


def class_source(answer: str, task_text: str, class_name: str, user_text: str) -> str | None:
    """An answer to an extracted task, as a candidate for the user's own class: the user's file, then the
    answer's own part (after the task's source) with the task's ``Model`` read as `class_name` (the task's
    ``Model`` is that class built with the captured arguments, so a ``ModelNew`` subclassing it subclasses the
    class). None for an answer that is not the task's source plus its own part."""
    import re

    task_text = task_text.rstrip()
    if not answer.startswith(task_text):
        return None
    return user_text.rstrip() + "\n\n" + re.sub(r"\bModel\b", class_name, answer[len(task_text) :])


@dataclass
class ClassEdit:
    """The guarded rewrite of one hot class in the user's own file, from a kept model-wide answer."""

    cls: str  # class key
    name: str
    path: Path | None  # the file that defines the class
    new_text: str | None = None  # None: not rewritable, `why` says why
    why: str = ""
    old_text: str | None = None  # the file's text the rewrite was made from (before this run's edits)


def class_edits(
    result: ModelWideResult, workspace: Path, texts: Callable[[Path], str | None] | None = None
) -> list[ClassEdit]:
    """For each module kept by the end-to-end check whose class is defined in a file of the workspace: that file
    with the class rewritten (`usecases.apply.rewrite_for`, the guarded, weight-sharing rewrite) to run the
    answer for calls like the verified ones and the original forward for anything else. The answer goes in as
    it was verified: a ``ModelNew`` subclassing the class (the task's source plus its own part, as forge's
    offline candidates are), with the task's ``Model`` read as the class itself. A class of a library
    (torchvision, transformers), or an answer written otherwise, gets a `ClassEdit` with the reason: the patch
    file stays the way to use it. `texts` gives a file's text as the caller has it (an editor's unsaved
    document), None for the file on disk; a file with two rewritten classes gets both, each `ClassEdit` of it
    carrying the file's text before the first and after its own."""
    from .apply import rewrite_for

    workspace = workspace.resolve()
    kept = set(result.check.kept) if result.check is not None else set()
    edits: list[ClassEdit] = []
    current: dict[Path, str] = {}  # a file's text with the edits before this one (two classes of one file)
    first: dict[Path, str] = {}  # a file's text before any
    for mo in result.modules:
        if mo.status != "kept" or mo.cls not in kept or mo.source_file is None or mo.task is None:
            continue
        c = result.report.cls(mo.cls)
        path = Path(c.file).resolve() if c is not None and c.file else None
        edit = ClassEdit(mo.cls, mo.name, path)
        edits.append(edit)
        if path is None or not path.is_relative_to(workspace) or ".forge" in path.parts or not path.is_file():
            edit.why = "its class is not defined in a file of the workspace (the patch file applies it)"
            continue
        if path not in current:
            given = texts(path) if texts is not None else None
            current[path] = given if given is not None else path.read_text(encoding="utf-8")
            first[path] = current[path]
        text = current[path]
        edit.old_text = first[path]
        source = class_source(Path(mo.source_file).read_text(), Path(mo.task).read_text(), mo.name, text)
        if source is None:
            edit.why = NOT_A_SUBCLASS
            continue
        try:
            rewrite = rewrite_for(
                text,
                mo.name,
                source,
                mo.domain or {},
                run_id=mo.run_id or "",
                candidate_id=mo.candidate_id or "",
                speedup=mo.speedup or 0.0,
            )
        except UseCaseError as exc:
            edit.why = str(exc)
            continue
        edit.new_text = current[path] = rewrite.new_text
    return edits


def file_edits(edits: list[ClassEdit]) -> dict[Path, tuple[str, str, list[str]]]:
    """The rewritten files of `class_edits`: path -> (text before, text after every rewrite, the classes)."""
    out: dict[Path, tuple[str, str, list[str]]] = {}
    for e in edits:
        if e.new_text is None or e.path is None or e.old_text is None:
            continue
        names = out[e.path][2] if e.path in out else []
        out[e.path] = (e.old_text, e.new_text, [*names, e.name])
    return out


def mode_says(mode: str) -> str:
    """What a whole-model mode does, in words: "CUDA graphs", "channels_last, then torch.compile(mode='default')"."""
    words = {
        "channels_last": "parameters and 4-D inputs in channels_last",
        "cuda_graphs": "the forward replayed as CUDA graphs",
        "blocks": "each hot block compiled on its own",
        "eager_casts": "eager's bf16/fp16 roundings kept in the compiled code",
    }
    return ", ".join(words.get(p, f"torch.compile(mode={p!r})") for p in mode.split("+"))


def interrupted_runs(workspace: Path, entry: str) -> list[ModelWideResult]:
    """The workspace's interrupted model-wide runs of `entry` (``file.py:function``, or a script), newest first."""
    from ..hotspots.entry import EntryError

    def key(text: str) -> tuple[str, str, tuple[str, ...]] | None:
        try:
            e = parse_entry(text, workspace)
        except EntryError:
            return None
        return str(e.path.resolve()) if e.path else e.module or "", e.function or "", tuple(e.argv)

    want = key(entry)
    return [r for r in load_model_wide_results(workspace) if r.state == "interrupted" and key(r.report.entry) == want]


def apply_class_edits(result: ModelWideResult, workspace: Path) -> list[ClassEdit]:
    """Write `class_edits` into the user's files (a file with two rewritten classes gets both), keeping each file's
    text before and after in the run's folder (``applied.json``) for `undo_applied`."""
    edits = class_edits(result, workspace)
    files = file_edits(edits)
    if files and result.folder is not None:
        record = [{"path": str(p), "before": b, "after": a, "classes": c} for p, (b, a, c) in files.items()]
        (result.folder / "applied.json").write_text(json.dumps(record, indent=1))
    for path, (_, after, _) in files.items():
        path.write_text(after, encoding="utf-8")
    return edits


def undo_applied(workspace: Path, stamp: str = "latest") -> list[Path]:
    """Put back every file a model-wide run's ``--apply`` rewrote (`apply_class_edits`), in one step: each file must
    still hold the rewritten text (or already the original); a file edited since refuses the whole undo, and
    nothing is changed. The files put back; raises `UseCaseError` for a run with nothing to undo."""
    runs = [r for r in load_model_wide_results(workspace) if r.folder and (r.folder / "applied.json").is_file()]
    if stamp != "latest":
        runs = [r for r in runs if r.folder is not None and r.folder.name == stamp]
    if not runs:
        raise UseCaseError(
            f"no model-wide run {stamp!r} under {workspace / '.forge' / 'model_wide'} has edits to undo "
            "(only --apply writes them)"
        )
    folder = runs[0].folder
    assert folder is not None
    record = json.loads((folder / "applied.json").read_text())
    now = {
        r["path"]: Path(r["path"]).read_text(encoding="utf-8") if Path(r["path"]).is_file() else None for r in record
    }
    edited = [r["path"] for r in record if now[r["path"]] not in (r["after"], r["before"])]
    if edited:
        raise UseCaseError(
            f"{', '.join(edited)} changed since run {folder.name} rewrote it; nothing was undone (your version "
            "control still can)"
        )
    back = []
    for r in record:
        if now[r["path"]] == r["after"]:
            Path(r["path"]).write_text(r["before"], encoding="utf-8")
            back.append(Path(r["path"]))
    (folder / "applied.json").rename(folder / "applied.undone.json")
    return back
