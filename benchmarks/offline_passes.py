"""How many replay passes the range profiler's counters need on a chip, computed on a machine with no GPU: CUPTI's
host API (``cuptiProfilerHost*``) takes a chip name and builds the configuration image without a device or driver,
so the pass count of any metric set can be read offline.

    FORGE_CUPTI_LIB=/tmp/cupti/x130/nvidia/cu13/lib/libcupti.so.13 \\
        PYTHONPATH=. .venv/bin/python benchmarks/offline_passes.py [--lib PATH] [--chip GH100] [--json out.json]

The libcupti comes from the ``nvidia-cuda-cupti`` wheel (``pip download --no-deps nvidia-cuda-cupti==13.0.*``,
unzipped anywhere); it needs its ``libnvperf_host.so`` beside it. Prints, for `inprocess.RANGE_METRICS`: each
metric's passes alone, the whole set's, the whole set's less each metric (and the greedy removals that save the
most), then a few candidate reduced sets.
"""

from __future__ import annotations

import argparse
import ctypes as ct
import json
import os
import random
import sys
from pathlib import Path

from forge_lsp.profiler import cupti
from forge_lsp.profiler.inprocess import RANGE_METRICS

SOL_DROP_A = [
    "gpu__time_duration.sum",
    "dram__bytes.sum.per_second",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
]
SOL_DROP_B = [
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
]
#: what set (c) must keep
REQUIRED_C = [
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "smsp__average_warps_active_per_issue_active.ratio",
    "smsp__issue_active.avg.per_cycle_active",
    "sm__cycles_elapsed.avg",
    *[m for m in RANGE_METRICS if "__sass_" in m],
]

#: stand-ins for the l1tex request counters (each global load/store instruction is one LSU request)
REQUEST_STAND_INS = {
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": "smsp__sass_inst_executed_op_global_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": "smsp__sass_inst_executed_op_global_st.sum",
}


def load(path: str) -> ct.CDLL:
    """libcupti at `path`, bound as `cupti.library()` (so `cupti.call` and its structs use it); libnvperf_host beside
    it is loaded first, globally, in case libcupti does not find it on its own."""
    host = Path(path).with_name("libnvperf_host.so")
    if host.exists():
        ct.CDLL(str(host), mode=ct.RTLD_GLOBAL)
    os.environ["FORGE_CUPTI"] = path
    lib = cupti.library()
    if getattr(lib, "_name", None) != path:
        raise SystemExit(f"cupti.library() loaded {lib._name}, not {path}")
    return lib


class Passes:
    """Pass counts of metric sets on one chip, memoized. The order the metrics are added in matters: CUPTI packs
    the counters into passes greedily, in that order, so the same set can need a different number of passes."""

    def __init__(self, chip: str) -> None:
        self.chip = chip
        self.cache: dict[tuple[str, ...], int | str] = {}

    def __call__(self, metrics) -> int | str:
        """The passes `metrics` need, added in the order given, or CUPTI's error when it refuses them."""
        key = tuple(metrics)
        if key not in self.cache:
            try:
                self.cache[key] = self._passes(list(key))
            except cupti.CuptiError as err:
                self.cache[key] = str(err)
        return self.cache[key]

    def best_order(self, metrics: list[str], tries: int = 300, seed: int = 0) -> tuple[int, list[str]]:
        """The fewest passes found over orderings of `metrics` (as given, most passes alone first, then random
        shuffles) and the order that gave them."""
        alone = {m: self([m]) for m in metrics}
        orders = [list(metrics), sorted(metrics, key=lambda m: -alone[m] if isinstance(alone[m], int) else 0)]
        rng = random.Random(seed)
        for _ in range(tries):
            order = list(metrics)
            rng.shuffle(order)
            orders.append(order)
        found = [(p, o) for o in orders if isinstance(p := self(o), int)]
        return min(found, key=lambda x: x[0])

    def _passes(self, metrics: list[str]) -> int:
        init = cupti.HostInitialize.new(
            profilerType=cupti.PROFILER_TYPE_RANGE, pChipName=self.chip.encode(), pCounterAvailabilityImage=None
        )
        cupti.call("cuptiProfilerHostInitialize", ct.byref(init))
        host = ct.c_void_p(init.pHostObject)
        try:
            names = (ct.c_char_p * len(metrics))(*[m.encode() for m in metrics])
            cupti.call(
                "cuptiProfilerHostConfigAddMetrics",
                ct.byref(
                    cupti.HostConfigAddMetrics.new(pHostObject=host, ppMetricNames=names, numMetrics=len(metrics))
                ),
            )
            size = cupti.HostGetConfigImageSize.new(pHostObject=host)
            cupti.call("cuptiProfilerHostGetConfigImageSize", ct.byref(size))
            image = (ct.c_uint8 * size.configImageSize)()
            cupti.call(
                "cuptiProfilerHostGetConfigImage",
                ct.byref(
                    cupti.HostGetConfigImage.new(
                        pHostObject=host, configImageSize=len(image), pConfigImage=ct.addressof(image)
                    )
                ),
            )
            passes = cupti.HostGetNumOfPasses.new(configImageSize=len(image), pConfigImage=ct.addressof(image))
            cupti.call("cuptiProfilerHostGetNumOfPasses", ct.byref(passes))
            return int(passes.numOfPasses)
        finally:
            cupti.call("cuptiProfilerHostDeinitialize", ct.byref(cupti.HostDeinitialize.new(pHostObject=host)))


def greedy_drop(passes: Passes, metrics: list[str], keep: list[str] = ()) -> list[tuple[str, int]]:
    """Drop, one at a time, the metric (outside `keep`) whose removal saves the most passes, while one saves any."""
    current, steps = list(metrics), []
    while True:
        base = passes(current)
        best = None
        for m in current:
            if m in keep:
                continue
            p = passes([x for x in current if x != m])
            if isinstance(p, int) and p < base and (best is None or p < best[1]):
                best = (m, p)
        if best is None:
            return steps
        current.remove(best[0])
        steps.append(best)


def free_additions(passes: Passes, base: list[str], pool: list[str]) -> list[str]:
    """The metrics of `pool` that can join `base` (greedily, in order) without adding a pass."""
    current, target = list(base), passes(base)
    for m in pool:
        if m not in current and passes([*current, m]) == target:
            current.append(m)
    return [m for m in current if m not in base]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=os.environ.get("FORGE_CUPTI_LIB"), help="path of libcupti.so.13")
    ap.add_argument("--chip", default="GH100")
    ap.add_argument("--init", action="store_true", help="call cuptiProfilerInitialize first (needs a driver)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if not args.lib:
        ap.error("give --lib or FORGE_CUPTI_LIB")
    lib = load(args.lib)
    version = ct.c_uint32()
    lib.cuptiGetVersion(ct.byref(version))
    print(f"libcupti {args.lib} (CUPTI API version {version.value}), chip {args.chip}")
    if args.init:
        cupti.call("cuptiProfilerInitialize", ct.byref(cupti.ProfilerInitialize.new()))

    passes = Passes(args.chip)
    out: dict = {"lib": args.lib, "cupti_api_version": version.value, "chip": args.chip}
    first = passes(RANGE_METRICS[:1])
    if not isinstance(first, int):
        print("the host API failed:", first)
        return 1

    whole = passes(RANGE_METRICS)
    print(f"\n{'metric':68} alone  whole-without")
    rows = {}
    for m in RANGE_METRICS:
        alone, without = passes([m]), passes([x for x in RANGE_METRICS if x != m])
        rows[m] = {"alone": alone, "whole_without": without}
        print(f"{m:68} {alone!s:>5}  {without!s:>5}")
    print(f"whole set ({len(RANGE_METRICS)} metrics): {whole} passes")
    out |= {"per_metric": rows, "whole": whole}

    steps = greedy_drop(passes, RANGE_METRICS)
    print("\ngreedy drops (metric dropped -> passes left):")
    for m, p in steps:
        print(f"  - {m:66} -> {p}")
    out["greedy_drops"] = steps

    set_a = [m for m in RANGE_METRICS if m not in SOL_DROP_A]
    set_b = [m for m in set_a if m not in SOL_DROP_B]
    req = [m for m in RANGE_METRICS if m in REQUIRED_C]
    missing = [m for m in REQUIRED_C if m not in RANGE_METRICS]
    extra = free_additions(passes, req, RANGE_METRICS)
    set_c = [m for m in RANGE_METRICS if m in req or m in extra]
    req_d = [REQUEST_STAND_INS.get(m, m) for m in req]
    extra_d = free_additions(passes, req_d, RANGE_METRICS)
    set_d = req_d + extra_d
    sets = {
        "a": set_a,
        "b": set_b,
        "c_required": req,
        "c_with_free_additions": set_c,
        "d_required_sass_requests": req_d,
        "d_with_free_additions": set_d,
        "whole_sass_requests": [REQUEST_STAND_INS.get(m, m) for m in RANGE_METRICS],
    }
    print("\ncandidate sets: passes in RANGE_METRICS order, and the fewest over orderings tried")
    best = {}
    for name, s in {"whole": list(RANGE_METRICS), **sets}.items():
        best[name] = passes.best_order(s)
        print(f"  {name:22} {len(s):2} metrics  {passes(s)} passes  best order {best[name][0]}")
    print("  (c) required-only greedy drops:", greedy_drop(passes, req) or "none save a pass")
    print("  (c) metrics free to add:", ", ".join(extra) or "none")
    print("  (d) = (c) with", REQUEST_STAND_INS, "; free to add:", ", ".join(extra_d) or "none")
    print("  (d) left out:", [m for m in RANGE_METRICS if m not in set_d and m not in REQUEST_STAND_INS])
    if missing:
        print("  (c) required but not in RANGE_METRICS:", missing)
    groups = {
        "sass": [m for m in RANGE_METRICS if "__sass_" in m],
        "l1tex": [m for m in RANGE_METRICS if m.startswith("l1tex__")],
        "speed_of_light": [
            m for m in RANGE_METRICS if m.startswith(("gpu__", "sm__cycles", "sm__throughput", "dram__", "lts__"))
        ],
    }
    print("\ngroups (check against the GPU machine: sass 1, l1tex 5, speed_of_light 9, all 12):")
    for name, s in groups.items():
        print(f"  {name:22} {len(s):2} metrics  {passes(s)} passes")
    out |= {
        "sets": {k: {"metrics": v, "passes": passes(v)} for k, v in {**sets, **groups}.items()},
        "best_orders": {k: {"passes": p, "order": o} for k, (p, o) in best.items()},
        "free_additions_c": extra,
        "free_additions_d": extra_d,
    }
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
