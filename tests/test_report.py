"""`forge report`: the report of real CPU runs, opened in headless Chromium.

Two real runs in one workspace, both made by `forge optimize` (the CLI, the use case, real worker processes):
the offline candidates of a small softmax task (a built-in Triton kernel under the interpreter, torch.compile),
and a scripted-model run against the real chat-completions server on 127.0.0.1 (`tests/fake_openai.py`) with
a refused Coder call, a compile error, its repair, a wrong result and a correct candidate. `forge report`
writes each as one HTML file; Debian's chromium, driven by Playwright (no browser download), opens it from
file:// and the page is checked as a person would use it: the tree, the charts, a candidate's source and
verdict, clicking a node, no console error, and no request but the file itself. Screenshots go to
`.ci/artifacts/report/`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import candidates as C
import pytest
from conftest import FIXTURES, ROOT
from fake_openai import FakeOpenAI

from forge_lsp.agent.run_events import FinalTiming, UnknownEvent
from forge_lsp.agent.store import RunStore

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)

CHROMIUM = next((p for p in ("/usr/bin/chromium", "/usr/lib/chromium/chromium") if os.access(p, os.X_OK)), None)
ARTIFACTS = ROOT / ".ci" / "artifacts" / "report"

FAST_CPU = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""
REPAIR = json.dumps({"critical_issue": "unbalanced parenthesis in the max reduction", "fix": "remove the stray ')'"})
OPTIMIZE = json.dumps({"bottleneck": "one pass per row", "method": "fuse", "plan": "keep the row in registers"})


def forge(*args: str, cwd: Path, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "FORGE_MODEL")}
    return subprocess.run(
        [sys.executable, "-m", "forge_lsp.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=base | {"OMP_NUM_THREADS": "1"} | (env or {}),
    )


def coder_reply(source: str, summary: str) -> str:
    return json.dumps({"summary": summary, "source": source})


def scripted(workspace: Path, server: FakeOpenAI) -> None:
    """The model's side of the scripted run: a refusal, then a compile error, its repair, a wrong result, and
    whatever the Judge asks for (a repair's advice or an optimization plan), by the schema it is asked for."""
    coder = [
        {"refusal": "I can't help with that"},
        coder_reply(C.TRITON_COMPILE_ERROR, "Triton softmax, one row per program"),
        coder_reply(FAST_CPU, "repaired: the vectorized softmax"),
        coder_reply(C.TRITON_INCORRECT + "\n# scaled\n", "Triton softmax with a scale"),
        coder_reply(FAST_CPU + "\n# again\n", "the vectorized softmax, again"),
    ]

    def reply(body):
        text = json.dumps(body)
        if "You are the Judge" in body["messages"][0]["content"]:
            return REPAIR if "critical_issue" in text else OPTIMIZE
        return coder.pop(0) if coder else coder_reply(FAST_CPU + f"\n# {time.time()}\n", "one more")

    server.script(*[reply] * 60)
    (workspace / "forge.toml").write_text(f'model = "scripted"\nbase_url = "{server.base_url}"\n')


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, str, str]:
    """(workspace, offline run id, scripted run id)."""
    ws = tmp_path_factory.mktemp("report-ws")
    (ws / "softmax_small.py").write_text((FIXTURES / "softmax_small.py").read_text())
    cache = ["--cache-dir", str(ws / "cache"), "--device", "cpu"]
    offline = forge("optimize", "softmax_small.py", *cache, cwd=ws)
    assert offline.returncode in (0, 1), offline.stderr[-3000:]
    with FakeOpenAI() as server:
        scripted(ws, server)
        model = forge(
            "optimize", "softmax_small.py", *cache, "--no-offline", "--rounds", "4", "--search", "linear", cwd=ws
        )
        assert model.returncode in (0, 1), model.stderr[-3000:]
    store = RunStore.for_workspace(ws)
    ids = [r.id for r in store.list_runs()]
    store.close()
    assert len(ids) == 2
    return ws, ids[1], ids[0]


def report(ws: Path, *args: str) -> Path:
    r = forge("report", *args, cwd=ws, timeout=120)
    assert r.returncode == 0, r.stderr
    return Path(r.stdout.split()[0])


class Page:
    """A report opened in headless Chromium, with every console message, page error and request recorded."""

    def __init__(self, browser, path: Path):
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.console: list[tuple[str, str]] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.console.append((m.type, m.text)))
        self.page.on("pageerror", lambda e: self.console.append(("pageerror", str(e))))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.url = path.resolve().as_uri()
        self.page.goto(self.url)
        self.page.wait_for_selector("body[data-ready]", timeout=30_000)
        assert self.page.evaluate("document.body.dataset.ready") == "true"

    def candidate_text(self) -> str:
        return self.page.text_content("#candidate") or ""

    def select(self, cid: str) -> None:
        self.page.locator(f"#tree .node[data-id='{cid}'] circle").click()
        self.page.wait_for_selector(f"#candidate[data-candidate='{cid}']")

    def no_errors_and_no_network(self) -> None:
        assert [m for m in self.console if m[0] in ("error", "pageerror")] == []
        assert self.requests == [self.url]


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("needs Debian's chromium (apt-get install chromium; .ci/run installs it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs playwright (the dev extra)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def test_the_report_of_a_scripted_model_run_with_failures_in_chromium(runs, browser):
    ws, _, run = runs
    path = report(ws, run[:-2])  # a unique prefix
    assert path == ws / ".forge" / "reports" / f"{run}.html"
    html = path.read_text()
    assert "http://" not in html.split('id="forge-data"')[0].split("<script")[0]  # nothing remote in the head
    page = Page(browser, path)
    p = page.page
    store = RunStore.for_workspace(ws)
    cands = store.candidates(run)
    calls = store.calls(run)
    store.close()
    states = {c.id.split("/")[-1]: (c.verdict.status.value if c.verdict else c.status) for c in cands}
    assert {"compile_error", "correct", "incorrect"} <= set(states.values()), states
    assert any(c.error for c in calls)  # the refusal is a recorded failed call

    # the tree: the reference and every candidate, coloured by verdict, speedups on correct ones
    assert p.locator("#tree .node").count() == len(cands) + 1
    repair = next(c for c in cands if c.origin == "repair")
    assert repair.parent_id and states[repair.parent_id.split("/")[-1]] == "compile_error"
    # the charts (uPlot draws each into a canvas) and the roofline's note on the CPU
    for chart in ("#chart-rounds", "#chart-time", "#chart-cost"):
        assert p.locator(f"{chart} .uplot canvas").count() == 1, chart
    assert "CPU run has no roofline" in p.inner_text("#roofline-section")
    assert "not profiled" in p.inner_text("#roofline-notes")
    assert "dollars not recorded" in p.inner_text("#cost-notes")
    assert "no GPU seconds: a CPU run" in p.inner_text("#cost-notes")
    assert "timed cpu time" in p.inner_text("#summary").lower()

    # clicking the failed candidate shows its verdict, its log and its source, highlighted
    failed = next(k for k, s in states.items() if s == "compile_error")
    page.select(failed)
    text = page.candidate_text()
    assert "compile error" in text and "Verdict" in text
    assert p.locator("#candidate pre.source code.hljs .hljs-keyword").count() > 0
    assert "softmax_kernel" in p.inner_text("#candidate pre.source")
    # its repair: the diff to its parent and the Judge's advice, the model calls collapsed
    fixed = repair.id.split("/")[-1]
    page.select(fixed)
    assert "correct" in page.candidate_text()
    assert p.locator("#candidate table.checks tr").count() > 3  # every check, named
    assert "95% CI" in page.candidate_text()
    p.get_by_role("tab", name=f"Diff to {failed}").click()
    diff = p.inner_text("#candidate pre.diff")
    assert "+        return torch.softmax(x, dim=1)" in diff and "-" in diff
    p.get_by_role("tab", name="Diff to the reference").click()
    assert p.locator("#candidate pre.diff .add").count() > 0
    details = p.locator("#candidate details.call")
    assert details.count() >= 2 and p.locator("#candidate details.call[open]").count() == 0
    details.first.locator("summary").click()
    details.first.locator("pre").first.wait_for()  # the prompts are put in when the call is opened
    assert "You are the Judge" in details.first.inner_text()
    # the wrong result names its check and the worst mismatch
    wrong = next(k for k, s in states.items() if s == "incorrect")
    page.select(wrong)
    assert "Worst mismatch" in page.candidate_text() and "max_abs_error" in page.candidate_text()
    # a row of the table selects too
    p.locator(f"table.cands tr[data-id='{fixed}']").click()
    assert p.evaluate("document.getElementById('candidate').dataset.candidate") == fixed

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.select(fixed)
    p.screenshot(path=str(ARTIFACTS / "scripted-run.png"), full_page=True)
    page.no_errors_and_no_network()


def test_the_report_of_an_offline_run_in_chromium(runs, browser):
    ws, run, _ = runs
    out = ws / "elsewhere" / "offline.html"
    path = report(ws, run, "-o", str(out))
    assert path == out and out.stat().st_size < 1_000_000
    page = Page(browser, out)
    store = RunStore.for_workspace(ws)
    cands = store.candidates(run)
    store.close()
    assert cands and all(c.origin.startswith("offline:") for c in cands)
    assert page.page.locator("#tree .node").count() == len(cands) + 1
    best = page.page.evaluate("window.forgeReport.selected()")
    assert best in {c.id.split("/")[-1] for c in cands}
    assert "an offline candidate" in page.candidate_text()
    p = page.page
    # the outcome first, in words, above the fold; "best" only for a speedup
    first = p.locator("#summary .card").first
    outcome = first.inner_text()
    assert first.locator(".k").inner_text().lower() == "outcome", outcome
    assert re.search(r"× faster \(final re-timing\)|no faster candidate, nothing written", outcome), outcome
    assert first.bounding_box()["y"] < 1000  # in the first screen
    slower = [c for c in cands if c.speedup is not None and c.speedup <= 1]
    for c in slower:
        row = p.locator(f"table.cands tr[data-id='{c.id.split('/')[-1]}']").inner_text()
        assert "★" not in row and "slower" in row, row
    if all(c.speedup is None or c.speedup <= 1 for c in cands):
        assert (
            "fastest (search)" in p.inner_text("#summary").lower()
            and "best (search)" not in p.inner_text("#summary").lower()
        )
    # no empty chart: one round and no model call say so in a line, instead of an axis with nothing on it
    assert p.locator("#chart-rounds .uplot").count() == 0 and "One round only" in p.inner_text("#chart-rounds")
    assert "no model calls in this run" in p.inner_text("#cost-notes")
    assert "tokens" not in p.inner_text("#chart-cost .u-legend")  # no tokens axis for a run without tokens
    assert p.locator("#roofline .uplot").count() == 0 and "No roofline" in p.inner_text("#roofline-section")
    # the table says which timing its figures are, and why the reference's differ
    assert "speedup (search)" in p.inner_text("table.cands thead") and "its own run of the reference" in p.inner_text(
        "#table"
    )
    # every link of the page lands on something
    for href in p.eval_on_selector_all("a[href^='#']", "els => els.map(e => e.getAttribute('href'))"):
        assert p.locator(href).count() == 1, href
    page.page.screenshot(path=str(ARTIFACTS / "offline-run.png"), full_page=True)
    page.no_errors_and_no_network()


def test_a_run_still_being_written_is_reported_as_it_stands(tmp_path, browser):
    """A run another process is writing (WAL): its report says it is in progress and its queued candidate
    is pending, while the writer goes on adding events."""
    store = RunStore.for_workspace(tmp_path)
    run = store.create_run(tmp_path / "t.py", "Model", (FIXTURES / "softmax_small.py").read_text(), {})
    store.add_candidate(run, FAST_CPU, parent_id=None, origin="coder", summary="pending one")
    stop = threading.Event()

    def write() -> None:
        n = 0
        while not stop.is_set():
            store.add_event(run, UnknownEvent(kind="model_waiting_note", data={"n": n}))
            n += 1
            time.sleep(0.005)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        r = forge("report", run, "--workspace", str(tmp_path), cwd=tmp_path, timeout=120)
    finally:
        stop.set()
        writer.join()
        store.close()
    assert r.returncode == 0, r.stderr
    assert "in progress" in r.stdout
    page = Page(browser, Path(r.stdout.split()[0]))
    assert "still going on" in page.page.inner_text("#in-progress")
    assert "pending" in page.candidate_text()
    page.no_errors_and_no_network()


def test_a_model_wide_result_is_reported_with_its_module_runs(runs, browser, tmp_path):
    """A model-wide result (as `forge optimize --model-wide` leaves it) whose module was optimized in the
    scripted run: the run's report has the model-wide section, and `--model-wide` renders the result with the
    hot-spot table, the end-to-end check and a link to the module's run report, written beside it."""
    from forge_lsp.hotspots import HotspotReport
    from forge_lsp.hotspots.verify import ModelCheck
    from forge_lsp.usecases.model_wide import ModelWideResult, ModuleOutcome

    src, _, run = runs
    ws = tmp_path / "ws"
    shutil.copytree(src / ".forge", ws / ".forge", ignore=shutil.ignore_patterns("reports", "model_wide"))
    hot = HotspotReport.model_validate(
        {
            "entry": "model.py:build",
            "device": "cpu",
            "model": "Net",
            "model_ms": 4.0,
            "iterations": 5,
            "classes": [
                {
                    "key": "model.Softmaxer",
                    "name": "Softmaxer",
                    "module": "model",
                    "file": "model.py",
                    "line": 7,
                    "instances": 2,
                    "calls": 10,
                    "self_ms": 3.0,
                    "total_ms": 3.0,
                    "self_pct": 75.0,
                    "total_pct": 75.0,
                },
            ],
        }
    )
    result = ModelWideResult(
        report=hot,
        modules=[
            ModuleOutcome(
                cls="model.Softmaxer",
                name="Softmaxer",
                total_pct=75.0,
                run_id=run,
                speedup=1.3,
                status="kept",
                instances=["s1", "s2"],
                carried=["s3"],
                not_carried=["s4: not carried over (its calls cannot be rebuilt)"],
            )
        ],
        check=ModelCheck(
            kept=["model.Softmaxer"],
            outputs=[{"ok": True, "dtype": "float32", "shape": [4, 10], "max_abs": 1e-7, "atol": 1e-5, "rtol": 1e-5}],
            before_ms=4.0,
            after_ms=3.2,
            speedup=1.25,
            ci=[1.2, 1.3],
            reps=30,
            modules_speedup=1.1,
            modules_ci=[1.05, 1.15],
            model_modes=[
                {
                    "mode": "default",
                    "ok": True,
                    "compile_s": 9.5,
                    "before_ms": 4.0,
                    "after_ms": 3.2,
                    "speedup": 1.25,
                    "ci": [1.2, 1.3],
                    "note": "timed head to head against max-autotune-no-cudagraphs: default faster: 1.05×",
                },
                {"mode": "reduce-overhead", "ok": False, "why": "RuntimeError: no CUDA graphs on the CPU"},
            ],
            model_mode="default",
        ),
        notes=["one note"],
    )
    folder = ws / ".forge" / "model_wide" / "20261201-120000"
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps(result.to_json()))

    page = Page(browser, report(ws, run))
    section = page.page.text_content("#model-wide")
    assert "Softmaxer" in section and "outputs match" in section and f"{run} (this run)" in section
    page.no_errors_and_no_network()

    r = forge("report", "--model-wide", cwd=ws, timeout=120)
    assert r.returncode == 0, r.stderr
    main, module_report = (Path(line.split()[0]) for line in r.stdout.splitlines()[:2])
    assert module_report == main.parent / f"{run}.html" and module_report.is_file()
    page = Page(browser, main)
    body = page.page.text_content("#model-wide")
    assert "Hot spots" in body and "1.25×" in body and "(99% CI [1.20, 1.30], 30 forwards each way)" in body
    # the whole forward compiled on top: each mode, its outcome, the one chosen; the instances carried over
    modes = page.page.text_content("#model-wide table.modes")
    assert "default" in modes and "chosen" in modes and "no CUDA graphs on the CPU" in modes, modes
    assert "4.00 → 3.20" in modes, modes  # each mode's milliseconds, the original's beside it
    assert "default: timed head to head against max-autotune-no-cudagraphs: default faster: 1.05×" in body
    assert "the replacements alone: 1.10×" in body and "carried over to 1 more instance(s)" in body, body
    assert "s4: not carried over" in body
    page.page.locator(f"#model-wide a[href='{run}.html']").click()
    page.page.wait_for_selector("body[data-ready]")
    assert run in page.page.title()
    assert [m for m in page.console if m[0] in ("error", "pageerror")] == []


def _model_wide_page(ws: Path, stamp: str, result) -> Path:
    folder = ws / ".forge" / "model_wide" / stamp
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps(result.to_json()))
    r = forge("report", "--model-wide", stamp, cwd=ws, timeout=120)
    assert r.returncode == 0, r.stderr
    return Path(r.stdout.splitlines()[0].split()[0])


def test_a_model_wide_page_describes_the_model_wide_run_and_every_link_lands(browser, tmp_path):
    """The page of a model-wide result alone (no run of its own): its cards are the model-wide run's — outcome,
    modules kept of those run, end to end, compile mode, device — not a search's; every navigation link points at
    a section on the page; an end-to-end result under 1x (as runs before the interval rule could keep) is flagged;
    an interrupted run says so; a check timed on a busy CPU says with how many threads."""
    from forge_lsp.child import CpuShare
    from forge_lsp.hotspots import HotspotReport
    from forge_lsp.hotspots.verify import ModelCheck
    from forge_lsp.usecases.model_wide import ModelWideResult, ModuleOutcome

    ws = tmp_path / "ws"
    hot = HotspotReport.model_validate(
        {"entry": "tiny_decoder.py:build", "device": "cpu", "model": "TinyDecoder", "model_ms": 28.6, "iterations": 5}
    )
    modules = [
        ModuleOutcome(cls=f"m.{n}", name=n, total_pct=p, status=st)
        for n, p, st in (("DecoderBlock", 60.0, "kept"), ("GatedMLP", 25.0, "kept"), ("Attention", 10.0, "not_faster"))
    ]
    slower = ModelWideResult(
        report=hot,
        modules=modules,
        check=ModelCheck(
            kept=["m.DecoderBlock", "m.GatedMLP"],
            before_ms=28.595,
            after_ms=98.782,
            speedup=0.289,
            ci=[0.116, 4.07],
            cpu=CpuShare(threads=2, cores=0.98, fitted=1),
        ),
        patch_file=ws / "forge_patch.py",
    )
    page = Page(browser, _model_wide_page(ws, "20261205-010000", slower))
    cards = page.page.text_content("#summary") or ""
    assert "outcome" in cards and "2 of 3 kept" in cards and "3.46× slower" in cards, cards
    assert "best (search)" not in cards and "candidates" not in cards and "rounds" not in cards, cards
    assert page.page.locator("#summary .card.bad").count() == 1
    links = page.page.eval_on_selector_all("#nav a", "as => as.map((a) => a.getAttribute('href'))")
    assert links and all(page.page.locator(href).count() == 1 for href in links), links
    body = page.page.text_content("#model-wide") or ""
    assert "slower than the original end to end: 3.46× slower" in body
    assert "timed on a busy CPU: 2 threads got 1.0 cores, so the check used 1" in body, body
    page.no_errors_and_no_network()

    stopped = ModelWideResult(report=hot, modules=[modules[0]], state="interrupted", top=3)
    page = Page(browser, _model_wide_page(ws, "20261205-020000", stopped))
    cards = page.page.text_content("#summary") or ""
    assert "interrupted" in cards and "--resume" in cards and "not checked" in cards, cards
    assert "interrupted" in (page.page.text_content("header") or "")


def test_forge_report_says_what_is_missing(tmp_path):
    r = forge("report", cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and "no runs" in r.stderr
    RunStore.for_workspace(tmp_path).close()
    r = forge("report", "nosuchrun", cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and "no run 'nosuchrun'" in r.stderr
    r = forge("report", "--model-wide", cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and "no model-wide result" in r.stderr


def test_gpu_seconds_are_the_measured_device_time_of_the_timed_calls(tmp_path):
    """The cost chart's GPU seconds: what each verdict's timing measured (samples x mean per call, CUDA events
    on a GPU) for the reference and the candidate, and the final re-timing's; the workers' stage seconds apart."""
    from forge_lsp.engine.verdict import Status, Timing, TimingStats, Verdict
    from forge_lsp.report.data import gather

    def stats(mean_ms: float, n: int) -> TimingStats:
        return TimingStats(median_ms=mean_ms, mean_ms=mean_ms, min_ms=mean_ms, p10_ms=mean_ms, p90_ms=mean_ms, n=n)

    timing = Timing(
        mode="events",
        reference=stats(2.0, 100),
        candidate=stats(1.0, 100),
        speedup=2.0,
        speedup_ci95=(1.9, 2.1),
        l2_flush=True,
    )
    store = RunStore.for_workspace(tmp_path)
    run = store.create_run(tmp_path / "t.py", "Model", (FIXTURES / "softmax_small.py").read_text(), {})
    cid = store.add_candidate(run, FAST_CPU, parent_id=None, origin="coder", summary="one").id
    verdict = Verdict(status=Status.correct, timing=timing, stages={"compile": 3.0, "verify": 1.0, "time": 0.5})
    store.set_verdict(cid, verdict, correct=True, speedup=2.0)
    store.add_event(run, FinalTiming(candidate=cid, speedup=2.0, timing=timing.model_dump(mode="json")))
    store.set_run_status(run, "done", "")
    data = gather(store, run)
    store.close()
    assert data.cost_timed_label == "GPU s (timed calls)"
    assert data.cost[-1].timed_s == pytest.approx(2 * (0.2 + 0.1))  # the candidate's verdict, then the final one
    assert data.cost[-1].eval_s == pytest.approx(4.5)
    assert any(n.startswith("GPU seconds: the device time of the timed calls") for n in data.cost_notes)
