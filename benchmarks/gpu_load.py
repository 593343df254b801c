"""Another process's kernels on the device, to run checks and timings beside (a shared GPU, a busy laptop).

    python3 benchmarks/gpu_load.py --seconds 120 [--busy 0.9]

Launches matmuls of about a millisecond each, in bursts, on the default stream of its own process, busy for about
`--busy` of the time; prints the bursts it ran when done.
"""

from __future__ import annotations

import argparse
import random
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--busy", type=float, default=0.9)
    args = ap.parse_args()
    x = torch.randn(4096, 4096, device="cuda")
    end, bursts = time.monotonic() + args.seconds, 0
    while time.monotonic() < end:
        t0 = time.perf_counter()
        for _ in range(random.randint(5, 50)):
            x = torch.tanh(x @ x)
        torch.cuda.synchronize()
        spent = time.perf_counter() - t0
        time.sleep(spent * (1 - args.busy) / args.busy)
        bursts += 1
    print(f"gpu_load: {bursts} bursts in {args.seconds:g} s")


if __name__ == "__main__":
    main()
