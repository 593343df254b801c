"""Probe: what moving a judged output between two processes costs on this GPU, by the host pipe (`harness.wire`,
today's path) and by CUDA IPC into a buffer the receiving process allocated and exported.

    python benchmarks/ipc_probe.py

Prints one line per size and path (median of 5, milliseconds).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SIZES = [(1024, 1024), (4096, 8192), (8192, 8192)]


def worker(conn, wfd: int) -> None:
    import torch
    from torch.multiprocessing.reductions import rebuild_cuda_tensor

    from forge_lsp.engine import pipe
    from forge_lsp.engine.harness.wire import pack
    from forge_lsp.engine.pipe import JudgedOutputs

    torch.cuda.init()
    while True:
        msg = conn.recv()
        if msg is None:
            return
        kind, shape, extra = msg
        out = torch.randn(shape, device="cuda")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        if kind == "wire":
            pipe.send(wfd, JudgedOutputs(index=0).with_data(pack(out)))
            conn.send(time.perf_counter() - t0)
        else:
            t = rebuild_cuda_tensor(*extra)
            t_open = time.perf_counter() - t0
            t.copy_(out)
            torch.cuda.synchronize()
            del t
            torch.cuda.ipc_collect()
            conn.send((t_open, time.perf_counter() - t0))


def main() -> int:
    import torch
    from torch.multiprocessing.reductions import reduce_tensor

    from forge_lsp.engine import pipe
    from forge_lsp.engine.harness.wire import unpack

    ctx = mp.get_context("fork")  # the pipe's fd is inherited; CUDA starts after the fork
    parent, child = ctx.Pipe()
    r, w = os.pipe()
    p = ctx.Process(target=worker, args=(child, w), daemon=True)
    p.start()
    rx = pipe.Receiver(r, pipe.REPLY)
    torch.cuda.init()
    rows = []
    for shape in SIZES:
        mb = shape[0] * shape[1] * 4 / 2**20
        wire, ipc, opens = [], [], []
        for _ in range(5):
            parent.send(("wire", shape, None))
            t0 = time.perf_counter()
            msg = rx.recv()
            got = unpack(msg.data)
            got = got.to("cuda")
            torch.cuda.synchronize()
            wire.append((time.perf_counter() - t0) * 1000)
            parent.recv()
        for _ in range(5):
            buf = torch.empty(shape, device="cuda")
            _fn, args = reduce_tensor(buf)
            t0 = time.perf_counter()
            parent.send(("ipc", shape, args))
            t_open, _ = parent.recv()
            mine = buf.clone()
            torch.cuda.synchronize()
            ipc.append((time.perf_counter() - t0) * 1000)
            opens.append(t_open * 1000)
            del buf, mine
        rows.append((shape, mb, statistics.median(wire), statistics.median(ipc), statistics.median(opens)))
    parent.send(None)
    p.join(10)
    print(f"{'shape':14s} {'MiB':>6s} {'wire ms':>9s} {'ipc ms':>8s} {'ipc open ms':>11s}")
    for shape, mb, a, b, c in rows:
        print(f"{str(shape):14s} {mb:6.0f} {a:9.1f} {b:8.1f} {c:11.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
