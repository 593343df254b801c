"""Code action and hover latency of the real language server on a 1,000-file workspace, idle and while
an optimize run is active; the server's RSS idle and during the run. CPU only.

What it does:

1. generates the synthetic workspace of `benchmarks/index_speed.py` (default 1,000 files: modules,
   KernelBench-style task files, plain Python, .cu/.cuh, a pyproject.toml with [tool.forge.modules]
   entries, a .venv that is skipped) in a temp folder, plus ``hot/softmax_mod.py`` (the e2e tests'
   slow row softmax task), ``hot/softmax_warm.py`` (a copy, optimized once so that hovers on it
   render measured numbers) and ``hot/big_layers.py`` (~4,500 lines, 210 modules without example
   inputs: timed in a separate, smaller series, ``--big-requests``);
2. starts ``python -m forge_lsp.server`` over stdio with pytest-lsp's `LanguageClient` (outside
   pytest), VS Code's client capabilities, and a scripted chat-completions server
   (`tests/fake_openai.py`) as the model;
3. waits for the initial scan (polls a code action on the hot file until it answers), measures the
   server's idle RSS (its own PID: /proc/<pid>/status), opens ``--open`` files, optimizes the copy
   once (1 round), and times code actions and hovers idle;
4. starts ``forge.optimize`` on ``hot/softmax_mod.py::Model`` (linear search, many rounds). Each model
   reply is delayed (Coder ``--coder-delay`` s, Judge ``--judge-delay`` s) and every Coder reply is a
   correct vectorized ModelNew (two variants alternating, a unique comment each), so each round also
   verifies and times a candidate in a worker subprocess. While it runs:
   times ``--requests`` code actions and ``--requests`` hovers (sequential, one at a time, at
   nn.Module class lines and kernel lines of many files), with a didChange edit every
   ``--edit-every`` requests; samples the server's RSS (and its workers') meanwhile;
5. cancels the run (``forge.cancel``) and waits for its progress to end and its workers to exit.

The server runs with ``PYTHONPATH=benchmarks/lsp``: its ``sitecustomize.py`` logs every garbage
collection of the server (start, generation, pause), so slow requests can be matched to GC pauses;
``--experiment-gc-freeze S`` also makes the server call ``gc.freeze()`` every S seconds (a what-if for
a fix). ``--profile-server FILE`` runs the server under cProfile (main thread: the handlers).

    python benchmarks/lsp_latency.py [--files 1000] [--requests 500] [--out results.json]

The table is printed last. Latencies are client-side round trips (perf_counter around the awaited
request), so they include the client's JSON-RPC work too; the client and the server share the
machine's cores with the run's worker process.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

# tests/fake_openai.py (the scripted chat server) and benchmarks/index_speed.py (the workspace generator)
from fake_openai import FakeOpenAI
from index_speed import MODULE_FILE, make_workspace, percentile
from lsprotocol import types as t
from pytest_lsp import client_capabilities
from pytest_lsp.client import LanguageClient, make_test_lsp_client

from forge_lsp.workspace import WorkspaceIndex

TASK = (ROOT / "tests" / "fixtures" / "slow_softmax.py").read_text()
VARIANTS = (
    """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
""",
    """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        e = torch.exp(x - x.amax(dim=1, keepdim=True))
        return e / e.sum(dim=1, keepdim=True)
""",
)


# ------------------------------------------------------------------------------- scripted model
class Script:
    """Replies for every chat request by its response schema: Coder gets a ModelNew, the Judge advice."""

    def __init__(self, coder_delay: float, judge_delay: float) -> None:
        self.coder_delay, self.judge_delay = coder_delay, judge_delay
        self.coder_calls = self.judge_calls = 0

    def __call__(self, body: Any) -> dict[str, Any]:
        text = json.dumps(body) if body is not None else ""
        fmt = (body or {}).get("response_format") or {}
        name = ((fmt.get("json_schema") or {}).get("name") or "") if isinstance(fmt, dict) else ""
        if "RepairAdvice" in name or (not name and '"critical_issue"' in text):
            self.judge_calls += 1
            return {
                "delay": self.judge_delay,
                "content": json.dumps({"critical_issue": "none", "fix": "write a vectorized softmax"}),
            }
        if "OptimizeAdvice" in name or (not name and '"bottleneck"' in text):
            self.judge_calls += 1
            return {
                "delay": self.judge_delay,
                "content": json.dumps(
                    {"bottleneck": "a Python loop over rows", "method": "vectorize", "plan": "one softmax over dim 1"}
                ),
            }
        self.coder_calls += 1
        n = self.coder_calls
        source = VARIANTS[n % 2] + f"\n# benchmark round {n}\n"
        return {
            "delay": self.coder_delay,
            "content": json.dumps({"summary": f"vectorized softmax #{n}", "source": source}),
        }


# ------------------------------------------------------------------------------------ /proc
def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def hwm_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def descendants(pid: int) -> list[int]:
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                kids = Path(f"/proc/{p}/task/{tid}/children").read_text().split()
            except OSError:
                continue
            for k in kids:
                out.append(int(k))
                stack.append(int(k))
    return out


def cpu_s(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


# ------------------------------------------------------------------------------------ helpers
def stats(values: list[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "p50_ms": None, "p99_ms": None, "max_ms": None, "mean_ms": None}
    ms = [v * 1e3 for v in values]
    return {
        "n": len(ms),
        "p50_ms": percentile(ms, 50),
        "p99_ms": percentile(ms, 99),
        "max_ms": max(ms),
        "mean_ms": statistics.fmean(ms),
    }


def code_action_params(uri: str, line: int) -> t.CodeActionParams:
    pos = t.Position(line=line, character=0)
    return t.CodeActionParams(
        text_document=t.TextDocumentIdentifier(uri=uri),
        range=t.Range(start=pos, end=pos),
        context=t.CodeActionContext(diagnostics=[], trigger_kind=t.CodeActionTriggerKind.Automatic),
    )


def hover_params(uri: str, line: int, character: int) -> t.HoverParams:
    return t.HoverParams(
        text_document=t.TextDocumentIdentifier(uri=uri), position=t.Position(line=line, character=character)
    )


def command_of(action: Any) -> tuple[str, list[Any]] | None:
    """(command, arguments) of a code action as the client structured it (see tests/test_server_e2e.py)."""
    inner = getattr(action, "command", None)
    if isinstance(inner, str) and inner.startswith("{"):
        inner = ast.literal_eval(inner)
    if isinstance(inner, dict):
        return inner["command"], inner["arguments"]
    if isinstance(action, t.Command):
        return action.command, list(action.arguments or [])
    if inner is not None and hasattr(inner, "command"):
        return inner.command, list(inner.arguments or [])
    return None


class Editor:
    """The client side of the documents this benchmark opens and edits."""

    def __init__(self, client: LanguageClient) -> None:
        self.client = client
        self.docs: dict[str, dict[str, Any]] = {}

    def open(self, path: Path) -> str:
        uri = path.as_uri()
        if uri in self.docs:
            return uri
        text = path.read_text()
        self.docs[uri] = {"text": text, "version": 1}
        language = "cuda-cpp" if path.suffix in (".cu", ".cuh") else "python"
        self.client.text_document_did_open(
            t.DidOpenTextDocumentParams(
                text_document=t.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)
            )
        )
        return uri

    def append_line(self, uri: str, line_text: str) -> None:
        """An incremental edit at the end of the document (what VS Code sends when typing)."""
        doc = self.docs[uri]
        lines = doc["text"].split("\n")
        end = t.Position(line=len(lines) - 1, character=len(lines[-1]))
        doc["text"] += line_text
        doc["version"] += 1
        self.client.text_document_did_change(
            t.DidChangeTextDocumentParams(
                text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=doc["version"]),
                content_changes=[t.TextDocumentContentChangePartial(range=t.Range(start=end, end=end), text=line_text)],
            )
        )


async def until(predicate, timeout: float, what: str, every: float = 0.05):
    try:
        async with asyncio.timeout(timeout):
            while True:
                value = predicate()
                if asyncio.iscoroutine(value):
                    value = await value
                if value:
                    return value
                await asyncio.sleep(every)
    except TimeoutError:
        raise SystemExit(f"timed out after {timeout:g} s waiting for {what}") from None


def ended(client: LanguageClient, token: str) -> bool:
    return any(getattr(r, "kind", None) == "end" for r in client.progress_reports.get(token, []))


def run_stage(client: LanguageClient, token: str) -> str:
    """What the run was doing when a request was sent: the last progress report's phase."""
    reports = client.progress_reports.get(token) or []
    message = getattr(reports[-1], "message", None) if reports else None
    return (message or "starting").rsplit("·", 1)[-1].strip()


async def jobs_of(client: LanguageClient) -> list[dict[str, Any]]:
    runs = await client.protocol.send_request_async("forge/runs", None)
    raw = runs.runs if hasattr(runs, "runs") else runs["runs"]
    return [j._asdict() if hasattr(j, "_asdict") else dict(j) for j in raw]


# ------------------------------------------------------------------------------------ the run
async def measure(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="forge-lsp-latency-"))
    root, cache = tmp / "ws", tmp / "cache"
    root.mkdir()
    cache.mkdir()
    made = make_workspace(root, args.files, rng)
    (root / "hot").mkdir()
    hot, warm = root / "hot" / "softmax_mod.py", root / "hot" / "softmax_warm.py"
    hot.write_text(TASK)
    warm.write_text(TASK)
    big = root / "hot" / "big_layers.py"  # one large file (70 generated module files in one, no example inputs)
    big.write_text("".join(MODULE_FILE.format(i=5000 + i) for i in range(args.big_copies)))
    gc_dir = tmp / "gc"
    gc_dir.mkdir()

    # what the server will index (same code, in this process), for the targets and the file count
    local = WorkspaceIndex(root)
    t0 = time.perf_counter()
    local.scan()
    local_scan_s = time.perf_counter() - t0
    n_indexed = len(local.files())
    module_targets = [(p, m.line, m.name_column) for p, m in local.modules()]
    kernel_targets = [(p, k.line, k.column) for p, k in local.kernels()]
    big_targets = [(p, m.line, m.name_column) for p, m in local.modules() if p == str(big)]
    module_targets = [x for x in module_targets if x[0] != str(big)]

    script = Script(args.coder_delay, args.judge_delay)
    fake = FakeOpenAI().start()
    fake.script(*([script] * 5000))
    log_file = tmp / "server.log"
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(tmp),
        "OMP_NUM_THREADS": "1",
        "FORGE_CACHE_DIR": str(cache),
        "FORGE_LSP_LOG": str(log_file),
        "TRITON_CACHE_DIR": str(cache / "triton"),
        "OPENAI_API_KEY": "sk-benchmark-not-a-key",
        # benchmarks/lsp/sitecustomize.py logs the server's garbage collections (the server is unchanged)
        "PYTHONPATH": str(ROOT / "benchmarks" / "lsp"),
        "FORGE_BENCH_GC_LOG": str(gc_dir),
    }
    if args.experiment_gc_freeze:
        env["FORGE_BENCH_GC_FREEZE_EVERY"] = str(args.experiment_gc_freeze)

    client = make_test_lsp_client()

    @client.feature(t.CLIENT_REGISTER_CAPABILITY)
    def register_capability(params: t.RegistrationParams) -> None:
        return None

    @client.feature(t.CLIENT_UNREGISTER_CAPABILITY)
    def unregister_capability(params: t.UnregistrationParams) -> None:
        return None

    refreshes = {"codeLens": 0}

    @client.feature(t.WORKSPACE_CODE_LENS_REFRESH)
    def lens_refresh(params: None) -> None:
        refreshes["codeLens"] += 1

    @client.feature(t.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: t.ApplyWorkspaceEditParams) -> t.ApplyWorkspaceEditResult:
        return t.ApplyWorkspaceEditResult(applied=False, failure_reason="benchmark client does not apply edits")

    server_cmd = [sys.executable, "-m", "forge_lsp.server"]
    if args.profile_server:
        server_cmd = [
            sys.executable,
            "-m",
            "cProfile",
            "-o",
            str(Path(args.profile_server).resolve()),
            "-m",
            "forge_lsp.server",
        ]
    await client.start_io(*server_cmd, env=env, cwd=str(ROOT))
    pid = client._server.pid
    result: dict[str, Any] = {
        "files_generated": args.files,
        "files_indexed": n_indexed,
        "big_file_lines": big.read_text().count("\n"),
        "big_file_modules": len(big_targets),
        "modules": len(module_targets),
        "kernels": len(kernel_targets),
        "local_scan_s": local_scan_s,
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "server_pid": pid,
        "settings": {k: v for k, v in vars(args).items() if k not in ("out",)},
    }
    result["rss_mb_after_start"] = rss_mb(pid)
    try:
        init_opts = {
            "forge": {
                "model": "scripted",
                "baseUrl": fake.base_url,
                "device": "cpu",
                "search": "linear",
                "rounds": args.rounds,
                "offline": False,
                "profile": False,
            }
        }
        t_init = time.perf_counter()
        await client.initialize_session(
            t.InitializeParams(
                capabilities=client_capabilities("visual-studio-code"),
                root_uri=root.as_uri(),
                workspace_folders=[t.WorkspaceFolder(uri=root.as_uri(), name="bench")],
                initialization_options=init_opts,
            )
        )
        hot_uri, warm_uri = hot.as_uri(), warm.as_uri()
        model_line = next(i for i, s in enumerate(TASK.splitlines()) if s.startswith("class Model"))

        async def hot_actions() -> list[Any]:
            return await client.text_document_code_action_async(code_action_params(hot_uri, model_line)) or []

        await until(hot_actions, 300, "the initial scan (a code action on hot/softmax_mod.py)", every=0.02)
        scan_s = time.perf_counter() - t_init
        result["scan_s"] = scan_s  # initialize -> first code action that finds the hot file's Model
        await asyncio.sleep(args.settle)
        result["rss_mb_idle_after_scan"] = rss_mb(pid)

        editor = Editor(client)
        all_py = made["modules"] + made["tasks"] + made["plain"]
        all_cu = made["cuda"] + made["headers"]
        to_open = rng.sample(all_py, min(len(all_py), args.open * 4 // 5)) + rng.sample(
            all_cu, min(len(all_cu), args.open - args.open * 4 // 5)
        )
        opened = [editor.open(p) for p in to_open]
        await client.text_document_code_lens_async(
            t.CodeLensParams(text_document=t.TextDocumentIdentifier(uri=opened[0]))
        )

        def targets(n: int) -> list[tuple[str, int, int]]:
            """Mostly nn.Module class lines, some kernel lines, some on the hot files; across many files."""
            out = []
            for _ in range(n):
                r = rng.random()
                if r < 0.05:
                    out.append((warm_uri, model_line, 6))
                elif r < 0.08:
                    out.append((hot_uri, model_line, 6))
                elif r < 0.23 and kernel_targets:
                    p, line, col = rng.choice(kernel_targets)
                    out.append((Path(p).as_uri(), line, col))
                else:
                    p, line, col = rng.choice(module_targets)
                    out.append((Path(p).as_uri(), line, col))
            return out

        async def timed_requests(
            n: int, phase: str, token: str | None = None, plan: list[tuple[str, int, int]] | None = None
        ) -> dict[str, Any]:
            actions, hovers, nonempty = [], [], {"codeAction": 0, "hover": 0}
            by_stage: dict[str, dict[str, list[float]]] = {}
            walls: dict[str, list[tuple[float, float]]] = {"codeAction": [], "hover": []}
            plan = plan if plan is not None else targets(n)
            edits = 0
            for k, (uri, line, col) in enumerate(plan):
                if args.pace:
                    await asyncio.sleep(args.pace)
                stage = run_stage(client, token) if token else "idle"
                w0, t0 = time.time(), time.perf_counter()
                got = await client.text_document_code_action_async(code_action_params(uri, line))
                actions.append(time.perf_counter() - t0)
                walls["codeAction"].append((w0, actions[-1]))
                nonempty["codeAction"] += bool(got)
                w0, t0 = time.time(), time.perf_counter()
                got = await client.text_document_hover_async(hover_params(uri, line, col))
                hovers.append(time.perf_counter() - t0)
                walls["hover"].append((w0, hovers[-1]))
                nonempty["hover"] += got is not None
                per = by_stage.setdefault(stage, {"codeAction": [], "hover": []})
                per["codeAction"].append(actions[-1])
                per["hover"].append(hovers[-1])
                if args.edit_every and phase != "big" and (k + 1) % args.edit_every == 0:
                    editor.append_line(rng.choice(opened), f"\n# {phase} edit {k}\n")
                    edits += 1
            return {
                "codeAction": stats(actions),
                "hover": stats(hovers),
                "nonempty": nonempty,
                "edits": edits,
                "by_run_stage": {st: {kind: stats(v) for kind, v in per.items()} for st, per in by_stage.items()},
                "raw_ms": {
                    "codeAction": [round(v * 1e3, 3) for v in actions],
                    "hover": [round(v * 1e3, 3) for v in hovers],
                },
                "walls": walls,
            }

        def big_plan(n: int) -> list[tuple[str, int, int]]:
            return [(big.as_uri(), line, col) for _, line, col in (rng.choice(big_targets) for _ in range(n))]

        # -- warm-up run: optimize the copy once so that hovers on it render measured numbers
        client.workspace_did_change_configuration(t.DidChangeConfigurationParams(settings={"forge": {"rounds": 1}}))
        started = await client.workspace_execute_command_async(
            t.ExecuteCommandParams(command="forge.optimize", arguments=[warm_uri, "Model"])
        )
        if "job" not in started:
            raise SystemExit(f"forge.optimize (warm-up) did not start: {started}")
        warm_token = f"forge/{started['job']}"
        t0 = time.perf_counter()
        await until(lambda: ended(client, warm_token), 600, "the warm-up run to end", every=0.1)
        result["warmup_run_s"] = time.perf_counter() - t0
        h = await client.text_document_hover_async(hover_params(warm_uri, model_line, 6))
        result["warmup_hover"] = h.contents.value if h is not None else None
        client.workspace_did_change_configuration(
            t.DidChangeConfigurationParams(settings={"forge": {"rounds": args.rounds}})
        )
        await asyncio.sleep(args.settle)

        # -- idle: no run going
        result["rss_mb_idle"] = rss_mb(pid)
        result["idle"] = await timed_requests(args.idle_requests, "idle")
        result["idle_big"] = await timed_requests(args.big_requests, "big", plan=big_plan(args.big_requests))
        result["rss_mb_idle_after_requests"] = rss_mb(pid)

        # -- active: an optimize run keeps the job thread, the model calls and a worker busy
        cpu0 = cpu_s(pid)
        started = await client.workspace_execute_command_async(
            t.ExecuteCommandParams(command="forge.optimize", arguments=[hot_uri, "Model"])
        )
        if "job" not in started:
            raise SystemExit(f"forge.optimize did not start: {started}")
        token = f"forge/{started['job']}"
        await until(lambda: client.progress_reports.get(token), 60, "the run's progress")
        coder_before = script.coder_calls
        # wait until the first candidate is being evaluated: a worker process is up
        await until(lambda: script.coder_calls > coder_before and descendants(pid), 120, "the run's first worker")

        samples: list[tuple[float, float | None, float]] = []
        stop = asyncio.Event()

        async def sample_rss() -> None:
            while not stop.is_set():
                kids = descendants(pid)
                samples.append((time.perf_counter(), rss_mb(pid), sum(rss_mb(k) or 0 for k in kids)))
                await asyncio.sleep(0.2)

        sampler = asyncio.create_task(sample_rss())
        reports_before = len(client.progress_reports.get(token, []))
        coder_before, judge_before = script.coder_calls, script.judge_calls
        t_active = time.perf_counter()
        w_active = time.time()
        result["active"] = await timed_requests(args.requests, "active", token)
        active_s = time.perf_counter() - t_active
        result["active_big"] = await timed_requests(args.big_requests, "big", token, plan=big_plan(args.big_requests))
        w_active_end = time.time()
        stop.set()
        await sampler
        jobs = await jobs_of(client)
        job = next(j for j in jobs if j["id"] == started["job"])
        reports = client.progress_reports.get(token, [])
        result["active"].update(
            {
                "window_s": active_s,
                "job_status_at_end": job["status"],
                "job_message_at_end": job["message"],
                "progress_reports_during": len(reports) - reports_before,
                "coder_calls_during": script.coder_calls - coder_before,
                "judge_calls_during": script.judge_calls - judge_before,
                "server_cpu_s_during_run": (cpu_s(pid) or 0) - (cpu0 or 0),
            }
        )
        server_rss = [s[1] for s in samples if s[1] is not None]
        result["rss_mb_active"] = {
            "median": statistics.median(server_rss) if server_rss else None,
            "max": max(server_rss) if server_rss else None,
            "workers_median": statistics.median([s[2] for s in samples]) if samples else None,
        }

        # -- cancel
        t0 = time.perf_counter()
        cancelled = await client.workspace_execute_command_async(
            t.ExecuteCommandParams(command="forge.cancel", arguments=[started["job"]])
        )
        await until(lambda: ended(client, token), 60, "the cancelled run's progress end")
        result["cancel"] = {"reply": cancelled, "progress_end_s": time.perf_counter() - t0}
        await until(lambda: not descendants(pid), 30, "the run's workers to exit", every=0.1)
        result["cancel"]["workers_gone_s"] = time.perf_counter() - t0
        await asyncio.sleep(args.settle)  # anything the job still sends for the ended token
        kinds = [getattr(r, "kind", None) for r in client.progress_reports.get(token, [])]
        result["cancel"]["progress_after_end"] = len(kinds) - 1 - kinds.index("end") if "end" in kinds else None
        result["rss_mb_after_cancel"] = rss_mb(pid)
        result["rss_mb_server_peak"] = hwm_mb(pid)
        result["model_calls"] = {"coder": script.coder_calls, "judge": script.judge_calls}
        result["codelens_refreshes"] = refreshes["codeLens"]
        result["messages"] = [m.message for m in client.messages][:20]
        result["gc"] = gc_summary(gc_dir / f"gc-{pid}.tsv", result, (w_active, w_active_end))
    finally:
        try:
            await asyncio.wait_for(client.shutdown_session(), 30)
        except Exception as exc:  # noqa: BLE001 - report, then make sure the server is gone
            print(f"shutdown: {type(exc).__name__}: {exc}", file=sys.stderr)
            if client._server and client._server.returncode is None:
                client._server.kill()
        await client.stop()
        fake.close()
        if args.keep:
            print(f"kept {tmp} (server log: {log_file})", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return result


def gc_summary(path: Path, result: dict[str, Any], active: tuple[float, float]) -> dict[str, Any]:
    """The server's collections (from benchmarks/lsp/sitecustomize.py) and which slow requests they overlap."""
    if not path.exists():
        return {"logged": False}
    events = []
    for line in path.read_text().splitlines():
        wall, gen, ms, collected = line.split("\t")
        events.append((float(wall), int(gen), float(ms), int(collected)))
    during = [e for e in events if active[0] <= e[0] <= active[1]]
    out: dict[str, Any] = {
        "logged": True,
        "collections": len(events),
        "gen2": sum(1 for e in events if e[1] == 2),
        "gen2_max_ms": max((e[2] for e in events if e[1] == 2), default=0.0),
        "during_run": len(during),
        "gen2_during_run": sum(1 for e in during if e[1] == 2),
        "max_ms_during_run": max((e[2] for e in during), default=0.0),
        "pauses_over_5ms": [(round(e[0], 3), e[1], e[2]) for e in events if e[2] >= 5],
    }
    out["by_phase"] = {}
    for phase in ("idle", "idle_big", "active", "active_big"):  # the time each series of requests took
        walls = [w for ws in result.get(phase, {}).get("walls", {}).values() for w in ws]
        if not walls:
            continue
        lo, hi = min(w for w, _ in walls), max(w + d for w, d in walls)
        inside = [e for e in events if lo <= e[0] <= hi]
        out["by_phase"][phase] = {
            "seconds": round(hi - lo, 2),
            "gen2": sum(1 for e in inside if e[1] == 2),
            "max_ms": max((e[2] for e in inside), default=0.0),
            "total_ms": round(sum(e[2] for e in inside), 1),
        }
    slow = []
    for phase in ("idle", "active", "idle_big", "active_big"):
        for kind, walls in result.get(phase, {}).get("walls", {}).items():
            p50 = percentile([d for _, d in walls], 50)
            for w0, d in walls:
                if d < max(5e-3, 3 * p50):
                    continue
                hit = [e for e in events if w0 - e[2] / 1e3 <= e[0] <= w0 + d]
                slow.append(
                    {
                        "phase": phase,
                        "kind": kind,
                        "ms": round(d * 1e3, 2),
                        "server_gc_ms": round(sum(e[2] for e in hit), 2),
                    }
                )
    out["slow_requests"] = len(slow)
    out["slow_requests_overlapping_gc_over_1ms"] = sum(1 for x in slow if x["server_gc_ms"] >= 1)
    out["slowest"] = sorted(slow, key=lambda x: -x["ms"])[:10]
    return out


def print_table(r: dict[str, Any]) -> None:
    def f(v: Any, fmt: str = "{:8.2f}") -> str:
        return fmt.format(v) if isinstance(v, (int, float)) else f"{'-':>8}"

    a = r["active"]
    print(
        f"workspace: {r['files_generated']} files generated, {r['files_indexed']} indexed "
        f"({r['modules']} modules, {r['kernels']} kernels); {r['cpus']} CPUs, Python {r['python']}"
    )
    print(
        f"active window: {a['window_s']:.1f} s, job {a['job_status_at_end']!r} ({a['job_message_at_end']}); "
        f"{a['coder_calls_during']} Coder + {a['judge_calls_during']} Judge replies, "
        f"{a['progress_reports_during']} progress reports, {a['edits']} didChange edits during it; "
        f"server CPU {a['server_cpu_s_during_run']:.1f} s"
    )
    print(
        f"cancel: progress end after {r['cancel']['progress_end_s'] * 1e3:.0f} ms, "
        f"workers gone after {r['cancel']['workers_gone_s'] * 1e3:.0f} ms, "
        f"{r['cancel'].get('progress_after_end')} $/progress messages after its end"
    )
    print()
    print(f"{'latency (client round trip)':<34} {'n':>5} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for phase in ("idle", "active"):
        for kind in ("codeAction", "hover"):
            s = r[phase][kind]
            print(f"{kind + ' (' + phase + ' )':<34} {s['n']:>5} {f(s['p50_ms'])} {f(s['p99_ms'])} {f(s['max_ms'])}")
    for phase in ("idle_big", "active_big"):
        for kind in ("codeAction", "hover"):
            s = r[phase][kind]
            label = f"{kind} ({phase.split('_')[0]}, {r['big_file_lines']}-line file)"
            print(f"{label:<34} {s['n']:>5} {f(s['p50_ms'])} {f(s['p99_ms'])} {f(s['max_ms'])}")
    print(f"{'active, by what the run was doing':<34}")
    for stage, per in sorted(a["by_run_stage"].items(), key=lambda kv: -kv[1]["codeAction"]["n"]):
        for kind in ("codeAction", "hover"):
            s = per[kind]
            print(f"{'  ' + kind + ' @ ' + stage:<34} {s['n']:>5} {f(s['p50_ms'])} {f(s['p99_ms'])} {f(s['max_ms'])}")
    print()
    print(f"{'server':<34} {'value':>8}")
    rows = [
        ("scan s (initialize -> answers)", r["scan_s"]),
        ("files indexed", r["files_indexed"]),
        ("RSS MB idle after scan", r["rss_mb_idle_after_scan"]),
        ("RSS MB idle (after a finished run)", r["rss_mb_idle"]),
        ("RSS MB during run, median", r["rss_mb_active"]["median"]),
        ("RSS MB during run, max", r["rss_mb_active"]["max"]),
        ("worker RSS MB during run, median", r["rss_mb_active"]["workers_median"]),
        ("RSS MB peak (VmHWM)", r["rss_mb_server_peak"]),
    ]
    g = r.get("gc", {})
    if g.get("logged"):
        rows += [("server GC: gen2 collections (all)", g["gen2"]), ("server GC: gen2 max ms (all)", g["gen2_max_ms"])]
        for phase, b in g["by_phase"].items():
            rows += [
                (f"  {phase} ({b['seconds']:.0f} s): gen2 count", b["gen2"]),
                ("    longest pause ms", b["max_ms"]),
            ]
        rows += [
            ("slow requests (>max(5ms,3xp50))", g["slow_requests"]),
            ("  of which overlap a server GC", g["slow_requests_overlapping_gc_over_1ms"]),
        ]
    for name, v in rows:
        print(f"{name:<34} {f(v, '{:8.0f}') if isinstance(v, int) else f(v)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=500, help="code actions (and as many hovers) during the run")
    ap.add_argument("--idle-requests", type=int, default=200, help="code actions (and as many hovers) idle")
    ap.add_argument("--open", type=int, default=50, help="files opened in the editor")
    ap.add_argument("--edit-every", type=int, default=50, help="a didChange edit every N request pairs (0: none)")
    ap.add_argument(
        "--pace",
        type=float,
        default=0.02,
        help="seconds between request pairs (spreads the requests over several rounds of the run)",
    )
    ap.add_argument(
        "--big-requests",
        type=int,
        default=30,
        help="extra code actions (and hovers) on the large file, idle and during the run",
    )
    ap.add_argument("--big-copies", type=int, default=70, help="size of the large file, in generated module files")
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--coder-delay", type=float, default=0.5)
    ap.add_argument("--judge-delay", type=float, default=0.1)
    ap.add_argument("--settle", type=float, default=1.0, help="seconds to wait before reading idle RSS")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, help="also write the results (with every sample) as JSON here")
    ap.add_argument("--keep", action="store_true", help="keep the temp workspace and the server log")
    ap.add_argument(
        "--experiment-gc-freeze",
        type=float,
        metavar="S",
        default=0.0,
        help="what-if: the server calls gc.freeze() every S seconds (benchmarks/lsp/sitecustomize.py)",
    )
    ap.add_argument("--profile-server", metavar="FILE", help="run the server under cProfile, stats to FILE")
    args = ap.parse_args()
    result = asyncio.run(measure(args))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
