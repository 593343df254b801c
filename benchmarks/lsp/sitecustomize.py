"""Loaded by `benchmarks/lsp_latency.py`'s server (via PYTHONPATH): logs the server's garbage collections.

Active only when ``FORGE_BENCH_GC_LOG`` names a folder; each process writes ``gc-<pid>.tsv`` there with one
line per collection: wall-clock start (time.time()), generation, pause in ms, objects collected.
The server itself is not changed.
"""

import os

_folder = os.environ.get("FORGE_BENCH_GC_LOG")
if _folder:
    import gc
    import time

    _path = os.path.join(_folder, f"gc-{os.getpid()}.tsv")
    _fh = open(_path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - open for the process' life
    _start = [0.0, 0.0]

    def _on_gc(phase, info):
        if phase == "start":
            _start[0], _start[1] = time.time(), time.perf_counter()
        else:
            _fh.write(f"{_start[0]:.6f}\t{info.get('generation')}\t{(time.perf_counter() - _start[1]) * 1e3:.3f}\t"
                      f"{info.get('collected')}\n")

    gc.callbacks.append(_on_gc)

# Experiment (opt-in, `lsp_latency.py --experiment-gc-freeze S`): move every live object to the permanent
# generation every S seconds, approximating a server that calls gc.freeze() after its imports and its scan.
_freeze_every = os.environ.get("FORGE_BENCH_GC_FREEZE_EVERY")
if _freeze_every:
    import gc as _gc
    import threading as _threading

    def _freezer(every=float(_freeze_every)):
        stop = _threading.Event()
        while not stop.wait(every):
            _gc.freeze()

    _threading.Thread(target=_freezer, name="bench-gc-freeze", daemon=True).start()
