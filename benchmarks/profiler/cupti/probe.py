"""Probe on the GPU machine: do CUPTI's range profiler, PC sampling and activity records work in a process that runs
torch, without ncu (groundwork for profiling in the warm worker; BENCHMARKS.md, "Profiling in the process").

    pip install --no-deps --target /tmp/cupti cupti-python==13.4.0 pyelftools
    LD_LIBRARY_PATH=<site-packages>/nvidia/cu13/lib:$LD_LIBRARY_PATH PYTHONPATH=$PYTHONPATH:/tmp/cupti \
        python benchmarks/profiler/cupti/probe.py range|activity|pcs|kineto

One part per process (CUPTI's profiler is initialised once per process). `range_profile.py` and `pc_sampling.py` reach
the parts of libcupti that cupti-python does not bind through ctypes, with the struct layouts of CUDA 13.0's headers.
"""

import os
import subprocess
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def part(name):
    print(f"\n===== {name}", flush=True)


def main():
    part("env " + " ".join(sys.argv[1:]))
    import nvidia

    for p in nvidia.__path__:
        print("nvidia path", p, os.listdir(p)[:40])
    print("LD_LIBRARY_PATH", os.environ.get("LD_LIBRARY_PATH"))
    subprocess.run(
        "pip list 2>/dev/null | grep -iE 'cupti|cuda|nsight'; ncu --version | tail -1;"
        " find / -name 'libcupti.so*' 2>/dev/null | head; find / -name 'libnvperf_host*' 2>/dev/null | head",
        shell=True,
    )
    import torch
    from cuda.bindings import driver as cu

    x = torch.randn(8192, 8192, device="cuda")
    torch.cuda.synchronize()
    err, ctx = cu.cuCtxGetCurrent()
    print("ctx", err, ctx)

    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    if which in ("all", "range"):
        range_part(x, ctx)
    if which in ("all", "activity"):
        activity_part(x)
    if which in ("all", "pcs"):
        pcs_part(x, ctx)
    if which in ("all", "kineto"):
        kineto_part(x)


def range_part(x, ctx):
    import torch

    from forge_lsp.profiler.metrics import METRICS

    part("range profiler")
    try:
        import range_profile as crp
        from cupti import profiler_host as ph

        t0 = time.perf_counter()
        ok, bad = [], []
        # which of forge's metrics CUPTI knows (host side only)
        rp = crp.RangeProfiler(int(ctx), ["gpu__time_duration.sum"])
        print("chip", rp.chip, "init s", round(time.perf_counter() - t0, 3))
        for m in METRICS:
            try:
                rp.host.create_config_image([m])
                ok.append(m)
            except Exception as e:  # noqa: BLE001
                bad.append((m, str(e)[:80]))
        print("supported", len(ok), "unsupported", len(bad))
        for b in bad:
            print("  BAD", b)
        t1 = time.perf_counter()
        cfg = rp.host.create_config_image(ok)
        print("passes for all supported:", ph.get_num_of_passes(cfg), "config s", round(time.perf_counter() - t1, 3))
        rp.close()
    except Exception:  # noqa: BLE001 - a probe: say what failed and go on
        traceback.print_exc()
        ok = []
    try:
        metrics = ok or ["gpu__time_duration.sum", "dram__bytes_read.sum"]
        t0 = time.perf_counter()
        rp = crp.RangeProfiler(int(ctx), metrics, max_ranges=64)
        print("passes", rp.num_passes, "setup s", round(time.perf_counter() - t0, 3))

        def work():
            y = torch.softmax(x, -1)
            z = y @ x
            return torch.relu(z)

        work()
        torch.cuda.synchronize()
        for mode, name in ((crp.KERNEL_REPLAY, "kernel"), (crp.USER_REPLAY, "user")):
            t0 = time.perf_counter()
            rp.set_config(mode, crp.AUTO_RANGE)
            n = 0
            while True:
                rp.start()
                work()
                torch.cuda.synchronize()
                n += 1
                if rp.stop() or mode == crp.KERNEL_REPLAY or n > 200:
                    break
            rows, dropped = rp.results()
            print(
                f"{name} replay: {n} passes submitted, {len(rows)} ranges, dropped {dropped}, "
                f"s {time.perf_counter() - t0:.3f}"
            )
            from cupti import cupti as C

            for i in range(len(rows)):
                try:
                    q = C.ProfilerHostGetRangeNameParams()
                    q.struct_size = C.PROFILER_HOST_GET_RANGE_NAME_PARAMS_STRUCT_SIZE
                    q.p_counter_data_image = rp.image.ctypes.data
                    q.counter_data_image_size = rp.image.size
                    q.range_index = i
                    q.delimiter = "/"
                    C.profiler_host_get_range_name(q.ptr)
                    print("  range", i, q.p_range_name[:90])
                except Exception as e:  # noqa: BLE001
                    print("  range name failed", repr(e)[:200])
            for r in rows:
                print("   ", {k.split("__")[1][:40]: round(float(v), 2) for k, v in list(r.items())[:12]})
        rp.close()
    except Exception:  # noqa: BLE001 - a probe: say what failed and go on
        traceback.print_exc()


def activity_part(x):
    import torch

    part("activity")
    try:
        from cupti import cupti as C

        recs = []

        def done(acts):
            for a in acts:
                if a.kind == C.ActivityKind.CONCURRENT_KERNEL:
                    recs.append(
                        (
                            a.name[:60],
                            a.end - a.start,
                            (a.grid_x, a.grid_y, a.grid_z),
                            (a.block_x, a.block_y, a.block_z),
                            a.registers_per_thread,
                            a.static_shared_memory,
                            a.dynamic_shared_memory,
                        )
                    )

        t0 = time.perf_counter()
        C.activity_enable(C.ActivityKind.CONCURRENT_KERNEL)
        C.activity_register_callbacks(lambda: (8 << 20, 0), done)
        torch.softmax(x, -1) @ x
        torch.cuda.synchronize()
        C.activity_flush_all(1)
        C.activity_disable(C.ActivityKind.CONCURRENT_KERNEL)
        print("activity s", round(time.perf_counter() - t0, 3))
        for r in recs:
            print("  ", r)
    except Exception:  # noqa: BLE001 - a probe: say what failed and go on
        traceback.print_exc()


def pcs_part(x, ctx):
    import torch

    part("pc sampling")
    try:
        import cupy as cp
        import pc_sampling as cps
        from cupti import cupti as C

        src = r"""
extern "C" __global__ void strided(const float* __restrict__ a, float* __restrict__ b, int n, int s) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = a[(i * s) % n];
        b[i] = v * 2.0f + 1.0f;
    }
}
"""
        t0 = time.perf_counter()
        pcs = cps.PCSampler(int(ctx))
        print("pcs setup s", round(time.perf_counter() - t0, 3), "stall reasons", pcs.n)
        # the names `profiler/pcsamples.py` expects (ncu's, smsp__pcsamp_warps_issue_stalled_<reason>, or bare)
        print("stall reason names", sorted(pcs.stall_name.values()))
        try:

            def on_load(userdata, domain, cbid, cbdata):
                try:
                    pcs.on_module_loaded(userdata, domain, cbid, cbdata)
                except Exception as e:  # noqa: BLE001
                    print(
                        "module-load callback failed:",
                        type(cbdata),
                        [a for a in dir(cbdata) if not a.startswith("_")][:20],
                        repr(e)[:200],
                    )

            sub = C.subscribe(on_load, None)
            C.enable_callback(1, sub, C.CallbackDomain.RESOURCE, C.CallbackIdResource.MODULE_LOADED)
            print("subscribed for module loads")
        except Exception:  # noqa: BLE001 - a probe: say what failed and go on
            traceback.print_exc()
        mod = cp.RawModule(code=src, options=("-lineinfo",), backend="nvrtc")
        k = mod.get_function("strided")
        n = 1 << 26
        a = cp.random.rand(n, dtype=cp.float32)
        b = cp.empty_like(a)
        k(((n + 255) // 256,), (256,), (a, b, cp.int32(n), cp.int32(33)))
        cp.cuda.runtime.deviceSynchronize()
        try:
            cubin = mod.cubin if hasattr(mod, "cubin") else None
        except Exception:  # noqa: BLE001
            cubin = None
        print("cupy cubin attr", type(cubin))
        t0 = time.perf_counter()
        pcs.start()
        for _ in range(3):
            k(((n + 255) // 256,), (256,), (a, b, cp.int32(n), cp.int32(33)))
        torch.softmax(x, -1)
        torch.cuda.synchronize()
        res = pcs.stop()
        print("pcs sample s", round(time.perf_counter() - t0, 3), "pcs", len(res))
        for (crc, fn, off), stalls in sorted(res.items(), key=lambda kv: -sum(kv[1].values()))[:12]:
            print(
                "  ",
                fn[:50],
                hex(off),
                crc,
                pcs.source_line(crc, fn, off) if crc in pcs.cubins else "no cubin",
                dict(sorted(stalls.items(), key=lambda kv: -kv[1])[:3]),
            )
        print("cubins captured", len(pcs.cubins))
        pcs.close()
    except Exception:  # noqa: BLE001 - a probe: say what failed and go on
        traceback.print_exc()


def kineto_part(x):
    """What torch.profiler's trace says of each kernel launch (its args: grid, block, registers, shared memory): the
    kernel records `profiler/pcsamples.py` needs, without a CUPTI subscriber of forge's own."""
    import json
    import tempfile

    import torch
    from torch.profiler import ProfilerActivity, profile

    part("kineto kernel records")
    try:
        torch.softmax(x, -1)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            torch.softmax(x, -1)
            x @ x
            torch.cuda.synchronize()
        path = os.path.join(tempfile.mkdtemp(), "trace.json")
        prof.export_chrome_trace(path)
        print("kineto s", round(time.perf_counter() - t0, 3))
        events = json.load(open(path))["traceEvents"]
        for event in [e for e in events if e.get("cat") == "kernel"][:3]:
            print("kernel event", json.dumps({k: event.get(k) for k in ("name", "dur", "args")})[:900])
    except Exception:  # noqa: BLE001 - a probe: say what failed and go on
        traceback.print_exc()


if __name__ == "__main__":
    main()
