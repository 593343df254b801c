"""GPU memory across one batch of KernelBench load_inline candidates (run on the GPU machine).

    PYTHONPATH=. python3 benchmarks/batch_memory.py --device cuda:0 --out results.json [--limit N]

The 42 tasks of corpus/kernelbench/tasks (KernelBench levels 1-3, sizes shrunk) and their
load_inline CUDA candidates (corpus/kernelbench/candidates, same stem) are paired with
`forge eval DIR`'s own `pair_directory` and evaluated as `forge eval DIR` does: one `Evaluator` on the
device, `evaluate_many` per task, every candidate in the same device worker one after another, with
all of the engine's checks and timing. Before that, the candidates' CUDA builds are run by build
workers without a GPU, several at a time, as `evaluate_many` does within one task (`--prebuild 0`
leaves every build to the device worker, exactly as `forge eval DIR` would do with one candidate per
task); a build that fails there is built again, and reported, by the device worker.

Per candidate: verdict status, reason, speedup, and memory:

* from the verdict, where the engine carries it (`Verdict.memory`): the device's free memory before and
  after the evaluation and at the worker's start, whether the worker got back to its starting level
  (`recovered`), whether it was retried in a fresh worker after running out of device memory;
* from `nvidia-smi`, polled in a background thread (about every 0.25 s): the device worker owns the GPU,
  so this process cannot ask torch (`torch.cuda.mem_get_info` here would only see a context of its
  own). `nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory` gives the memory of the worker's
  process tree (matched by pid; where the pids do not match, as in a container with its own PID
  namespace, only the device figures are left), and `--query-gpu=memory.used,memory.free` the
  device's: the peak over the candidate's evaluation, and the free memory just before and just after it.

The table printed last: candidates, correct, infrastructure failures (crashed, out of memory — the
`out_of_memory` status or a runtime error mentioning CUDA out of memory — and workers that could not
start), the largest peak, and whether the free memory came back to its starting level after each
candidate. Target: no infrastructure failures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from forge_lsp.engine import (  # noqa: E402
    Backend,
    Candidate,
    EvalOptions,
    Evaluator,
    Status,
    Verdict,
    Worker,
    load_candidate,
    load_task,
)
from forge_lsp.usecases.evaluate import pair_directory  # noqa: E402

BATCH = ROOT / "corpus" / "kernelbench"
MIB = 1 << 20
#: How far below the starting level free memory may end (the engine's `gpu_memory_slack_bytes` default).
SLACK_MIB = 512
_OOM_TEXT = ("CUDA out of memory", "OutOfMemoryError", "CUDA_ERROR_OUT_OF_MEMORY", "cudaErrorMemoryAllocation")


# ----------------------------------------------------------------------------- nvidia-smi sampling
def _tree_pids(root: int) -> set[int]:
    """`root` and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and fields[1].isdigit():
            children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in out:
            out.add(pid)
            todo.extend(children.get(pid, []))
    return out


def _physical_gpu(device: str) -> str:
    """The `nvidia-smi -i` id of a torch device index (CUDA_VISIBLE_DEVICES maps indices to GPUs)."""
    index = int(device.split(":")[1]) if ":" in device else 0
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return visible[index] if index < len(visible) else str(index)


def _smi(args: list[str]) -> list[list[str]] | None:
    try:
        r = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    return [[f.strip() for f in line.split(",")] for line in r.stdout.splitlines() if line.strip()]


def _num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None  # "[N/A]" (MIG, some containers)


class SmiSampler:
    """Polls nvidia-smi for the device's memory and the device worker's (its whole process tree)."""

    def __init__(self, device: str, worker: Worker, interval: float = 0.25) -> None:
        self.gpu = _physical_gpu(device)
        self.worker, self.interval = worker, interval
        self.available = shutil.which("nvidia-smi") is not None and device.startswith("cuda")
        self.uuid: str | None = None
        if self.available:
            rows = _smi(["--query-gpu=uuid", "--format=csv,noheader", "-i", self.gpu])
            self.uuid = rows[0][0] if rows else None
            self.available = self.uuid is not None
        self.samples: list[dict[str, Any]] = []
        self.unmatched_apps = 0  # samples where the GPU had compute apps but none of the worker's pids
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="smi-sampler", daemon=True)

    def start(self) -> SmiSampler:
        if self.available:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def sample(self) -> dict[str, Any] | None:
        """One sample now (also kept in `samples`): t, device used/free MiB, worker MiB (None: no pid matched)."""
        if not self.available:
            return None
        t = time.monotonic()
        dev = _smi(
            ["--query-gpu=memory.used,memory.free,memory.total", "--format=csv,noheader,nounits", "-i", self.gpu]
        )
        apps = _smi(["--query-compute-apps=gpu_uuid,pid,used_memory", "--format=csv,noheader,nounits"]) or []
        proc = self.worker.proc
        pids = _tree_pids(proc.pid) if proc is not None and proc.poll() is None else set()
        mine = [r for r in apps if len(r) == 3 and r[0] == self.uuid]
        matched = [_num(r[2]) for r in mine if r[1].isdigit() and int(r[1]) in pids]
        s = {
            "t": t,
            "used": _num(dev[0][0]) if dev and len(dev[0]) >= 3 else None,
            "free": _num(dev[0][1]) if dev and len(dev[0]) >= 3 else None,
            "total": _num(dev[0][2]) if dev and len(dev[0]) >= 3 else None,
            "worker": sum(m for m in matched if m is not None) if matched else None,
            "worker_pid": proc.pid if proc is not None else None,
        }
        with self._lock:
            self.samples.append(s)
            if mine and not matched and pids:
                self.unmatched_apps += 1
        return s

    def _run(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            self.sample()
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - t0)))

    def window(self, t0: float, t1: float) -> dict[str, float | None]:
        with self._lock:
            inside = [s for s in self.samples if t0 <= s["t"] <= t1]
        worker = [s["worker"] for s in inside if s["worker"] is not None]
        used = [s["used"] for s in inside if s["used"] is not None]
        free = [s["free"] for s in inside if s["free"] is not None]
        return {
            "samples": len(inside),
            "worker_peak_mib": max(worker) if worker else None,
            "device_used_peak_mib": max(used) if used else None,
            "device_free_min_mib": min(free) if free else None,
        }


# ----------------------------------------------------------------------------- the batch
def prebuild(ev: Evaluator, cands: list[Candidate], n: int) -> dict[str, dict[str, Any]]:
    """Build the candidates' extensions into the shared cache with `n` GPU-less build workers at a time
    (what `evaluate_many` does within one task), so the device worker only loads them."""
    todo = [c for c in cands if c.backend in (Backend.cuda_inline, Backend.cpp_inline, Backend.nvrtc)]
    if n <= 0 or not todo or ev.device == "cpu":
        return {}
    hello = ev.worker.ensure_started()
    env = {"CUDA_VISIBLE_DEVICES": ""}  # as Evaluator's own build workers: they compile, never touch the GPU
    if hello.arch and hello.capability:
        env["FORGE_CUDA_ARCH"] = hello.arch
        env["TORCH_CUDA_ARCH_LIST"] = "{}.{}".format(*hello.capability)
    limit = ev.options.host_memory_limit() if hasattr(ev.options, "host_memory_limit") else None
    kwargs: dict[str, Any] = {"host_memory_limit": limit} if limit is not None else {}
    builders = [Worker("cpu", cache_dir=ev.cache_dir, env=env, **kwargs) for _ in range(n)]
    out: dict[str, dict[str, Any]] = {}
    lock = threading.Lock()
    idle = list(builders)

    def build(c: Candidate) -> None:
        with lock:
            b = idle.pop()
        try:
            t0 = time.perf_counter()
            res = b.build(c, timeout=ev.options.timeouts.compile)
            out[c.name] = {"ok": res.ok, "seconds": round(time.perf_counter() - t0, 2), "reason": res.reason[:300]}
            print(f"  built {c.name:58s} {'ok' if res.ok else 'FAILED'} {out[c.name]['seconds']:6.1f}s", flush=True)
        finally:
            with lock:
                idle.append(b)

    try:
        with ThreadPoolExecutor(max_workers=n) as pool:
            list(pool.map(build, todo))
    finally:
        for b in builders:
            b.close()
    return out


def infra_failure(v: Verdict) -> str | None:
    """What kind of infrastructure failure a verdict is (None: none): the worker crashed, ran out of
    memory, or could not start — failures of the machinery, not answers about the candidate."""
    text = f"{v.reason}\n{v.traceback}\n{v.log_excerpt}"
    if "worker could not start" in text:
        return "worker could not start"
    if v.status.value == "out_of_memory":
        return "out of memory"
    if v.status is Status.runtime_error and any(s in text for s in _OOM_TEXT):
        return "CUDA out of memory"
    if v.status is Status.crashed:
        return "crashed"
    return None


def _mib(x: int | None) -> float | None:
    return None if x is None else round(x / MIB, 1)


def row_of(task_name: str, c: Candidate, v: Verdict, smi: dict[str, Any], build: dict[str, Any] | None) -> dict:
    mem = getattr(v, "memory", None)
    engine = {}
    if mem is not None:
        engine = {
            "gpu_free_at_start_mib": _mib(getattr(mem, "gpu_free_at_start_bytes", None)),
            "gpu_free_before_mib": _mib(getattr(mem, "gpu_free_before_bytes", None)),
            "gpu_free_after_mib": _mib(getattr(mem, "gpu_free_after_bytes", None)),
            "gpu_kept_mib": _mib(getattr(mem, "gpu_kept_bytes", None)),
            "gpu_reserved_after_mib": _mib(getattr(mem, "gpu_reserved_after_bytes", None)),
            "recovered": getattr(mem, "recovered", None),
            "retried": getattr(mem, "retried", None),
            "host_peak_mib": _mib(getattr(mem, "host_peak_bytes", None)),
        }
    s = v.stages
    return {
        "task": task_name,
        "candidate": c.name,
        "status": v.status.value,
        "reason": v.reason,
        "failed_check": v.failed_check,
        "infra": infra_failure(v),
        "speedup": v.speedup,
        "ref_ms": v.timing.reference.median_ms if v.timing else None,
        "cand_ms": v.timing.candidate.median_ms if v.timing else None,
        "stages": dict(s),
        "build": build,
        "engine_memory": engine,
        "smi": smi,
    }


def returned(r: dict[str, Any], start_free: float | None) -> bool | None:
    """Whether the device's free memory came back to its starting level after the candidate: the engine's
    own word (`recovered`) where the verdict carries it, else nvidia-smi's free memory against the level
    measured once the worker had started, less the slack and the inputs the worker keeps."""
    rec = r["engine_memory"].get("recovered")
    if rec is not None:
        return bool(rec)
    after = r["smi"].get("free_after_mib")
    if after is None or start_free is None:
        return None
    kept = r["engine_memory"].get("gpu_kept_mib") or 0.0
    return after >= start_free - SLACK_MIB - kept


def main() -> int:
    ap = argparse.ArgumentParser(description="GPU memory across one batch of KernelBench load_inline candidates")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    ap.add_argument("--limit", type=int, help="only the first N candidates (in pairing order)")
    ap.add_argument("--tasks", type=Path, default=BATCH / "tasks")
    ap.add_argument("--candidates", type=Path, default=BATCH / "candidates")
    ap.add_argument("--cache-dir", type=Path, help="compile cache (default: the engine's, ~/.cache/forge-lsp)")
    ap.add_argument(
        "--prebuild", type=int, default=4, help="build workers compiling ahead (0: the device worker builds)"
    )
    ap.add_argument("--timing-budget", type=float, default=0.5, help="seconds of timing per candidate")
    args = ap.parse_args()

    jobs = pair_directory(args.tasks, args.candidates)
    pairs = [(t, c) for t, cs in jobs for c in cs]
    if args.limit is not None:
        pairs = pairs[: max(0, args.limit)]
    if not pairs:
        print("no task/candidate pairs found", file=sys.stderr)
        return 2
    by_task: dict[Path, list[Path]] = {}
    for t, c in pairs:
        by_task.setdefault(t, []).append(c)

    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M"), "device": args.device, "rows": []}
    opts = EvalOptions(timing_budget_s=args.timing_budget)
    t_all = time.perf_counter()
    with Evaluator(args.device, options=opts, cache_dir=args.cache_dir) as ev:
        hello = ev.worker.ensure_started()
        results["device_name"] = hello.device_name
        sampler = SmiSampler(ev.device, ev.worker).start()
        first = sampler.sample()
        start_free = first["free"] if first else None
        results["smi"] = {"available": sampler.available, "free_at_worker_start_mib": start_free}
        print(f"{len(pairs)} candidates, {len(by_task)} tasks on {ev.device} ({hello.device_name})", flush=True)
        if not sampler.available:
            print("  nvidia-smi unavailable: memory figures come from the verdicts only", flush=True)

        all_cands = {c: load_candidate(c) for _, c in pairs}
        t0 = time.perf_counter()
        builds = prebuild(ev, list(all_cands.values()), args.prebuild)
        results["prebuild_s"] = round(time.perf_counter() - t0, 1)

        try:
            for task_path, cand_paths in by_task.items():
                task = load_task(task_path)
                cands = [all_cands[p] for p in cand_paths]
                before = sampler.sample()
                state = {"t": time.monotonic(), "before": before}

                def on_verdict(c: Candidate, v: Verdict, task=task, state=state) -> None:
                    t_end = time.monotonic()
                    after = sampler.sample()
                    smi: dict[str, Any] = dict(sampler.window(state["t"], t_end))
                    smi["free_before_mib"] = state["before"]["free"] if state["before"] else None
                    smi["free_after_mib"] = after["free"] if after else None
                    smi["worker_pid"] = after["worker_pid"] if after else None
                    r = row_of(task.name, c, v, smi, builds.get(c.name))
                    r["returned"] = returned(r, start_free)
                    results["rows"].append(r)
                    state["t"], state["before"] = time.monotonic(), after
                    peak = smi.get("worker_peak_mib") or smi.get("device_used_peak_mib")
                    print(
                        f"{c.name:58s} {v.status.value:14s} speedup {v.speedup or 0:6.2f} "
                        f"peak {peak if peak is not None else '-'} MiB  back {r['returned']}  {v.reason[:90]}",
                        flush=True,
                    )

                for c in cands:  # one after another in the one device worker, built ahead (`prebuild`)
                    on_verdict(c, ev.evaluate(task, c))
        finally:
            sampler.stop()
            results["worker_starts"] = ev.worker.starts
            results["smi"]["unmatched_samples"] = sampler.unmatched_apps
            results["smi"]["samples"] = len(sampler.samples)
    results["wall_s"] = round(time.perf_counter() - t_all, 1)

    rows = results["rows"]
    infra = [r for r in rows if r["infra"]]
    peaks_worker = [r["smi"]["worker_peak_mib"] for r in rows if r["smi"].get("worker_peak_mib") is not None]
    peaks_device = [r["smi"]["device_used_peak_mib"] for r in rows if r["smi"].get("device_used_peak_mib") is not None]
    back = [r["returned"] for r in rows]
    summary = {
        "candidates": len(rows),
        "correct": sum(r["status"] == "correct" for r in rows),
        "infrastructure_failures": len(infra),
        "infrastructure_kinds": {k: sum(r["infra"] == k for r in infra) for k in sorted({r["infra"] for r in infra})},
        "max_peak_worker_mib": max(peaks_worker) if peaks_worker else None,
        "max_peak_device_used_mib": max(peaks_device) if peaks_device else None,
        "returned_after_each": all(b is True for b in back) if back and None not in back else None,
        "returned_count": sum(b is True for b in back),
        "not_returned": [r["candidate"] for r in rows if r["returned"] is False],
        "unknown_return": sum(b is None for b in back),
        "median_speedup_correct": (
            statistics.median([r["speedup"] for r in rows if r["status"] == "correct" and r["speedup"]])
            if any(r["status"] == "correct" and r["speedup"] for r in rows)
            else None
        ),
    }
    results["summary"] = summary
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2, default=str))

    print(f"\n== KernelBench load_inline batch on {results.get('device_name')} ({results['date']}) ==")
    print(
        f"{'candidate':58s} {'status':14s} {'speedup':>7s} {'peak MiB':>8s} {'free before':>11s} {'free after':>10s} back  reason"
    )
    for r in rows:
        e, s = r["engine_memory"], r["smi"]
        peak = s.get("worker_peak_mib") if s.get("worker_peak_mib") is not None else s.get("device_used_peak_mib")
        fb = e.get("gpu_free_before_mib") if e.get("gpu_free_before_mib") is not None else s.get("free_before_mib")
        fa = e.get("gpu_free_after_mib") if e.get("gpu_free_after_mib") is not None else s.get("free_after_mib")
        print(
            f"{r['candidate'][:58]:58s} {r['status'][:14]:14s} {r['speedup'] or 0:7.2f} "
            f"{'-' if peak is None else f'{peak:.0f}':>8s} {'-' if fb is None else f'{fb:.0f}':>11s} "
            f"{'-' if fa is None else f'{fa:.0f}':>10s} {str(r['returned'])[:5]:5s} {r['reason'][:70]}"
        )
    peak_label = (
        f"{summary['max_peak_worker_mib']:.0f} MiB (worker)"
        if summary["max_peak_worker_mib"] is not None
        else (
            f"{summary['max_peak_device_used_mib']:.0f} MiB (whole device)"
            if summary["max_peak_device_used_mib"] is not None
            else "- (no nvidia-smi)"
        )
    )
    kinds = ", ".join(f"{k} {n}" for k, n in summary["infrastructure_kinds"].items()) or "none"
    ret = (
        f"{summary['returned_count']}/{len(rows)}"
        + (f" (unknown {summary['unknown_return']})" if summary["unknown_return"] else "")
        + (f"; not: {', '.join(summary['not_returned'])}" if summary["not_returned"] else "")
    )
    print(
        f"\nbatch wall {results['wall_s']:.0f} s (prebuild {results['prebuild_s']:.0f} s), "
        f"worker starts {results.get('worker_starts')}"
    )
    print(f"| {'candidates':24s} | {len(rows)}")
    print(f"| {'correct':24s} | {summary['correct']}")
    print(f"| {'infrastructure failures':24s} | {summary['infrastructure_failures']} ({kinds})")
    print(f"| {'max peak GPU memory':24s} | {peak_label}")
    print(f"| {'free memory came back':24s} | {ret}")
    return 0 if not infra else 1


if __name__ == "__main__":
    sys.exit(main())
