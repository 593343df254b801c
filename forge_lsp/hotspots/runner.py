"""The child that runs a whole model and finds where its time goes (started by `hotspots.run`).

    python -m forge_lsp.hotspots.runner REQUEST.json

Reads the request (entry, device, warm-up and profiled iterations, capture budget, output folder), runs the
entry with every module call observed — ``nn.Module.__call__`` wrapped for the run, so that each call opens a
``torch.profiler`` range named for its instance, and each instance's first calls have their inputs copied
to the host — and writes ``report.json`` (a `HotspotReport`) plus one capture folder per hot instance.
Progress goes to the request's progress file, one JSON line per step. The user's code is never edited.

Time is each op's *self* time (device time of its kernels on CUDA, host time on the CPU) given to the
innermost module instance whose range encloses it, and to every enclosing instance as its total. A script
entry's first forward of each model is its warm-up (excluded whenever the model ran more than once; a model
run once is run again after the script on a copy of that call); a function entry is warmed up by forge before
the profiled forwards. Constructors are recorded as the
instances are made (``nn.Module.__new__`` wrapped for the run) and written back as Python source, which is
checked by building the module again and comparing its parameters' names and shapes.

This module is the child's main only: it reads the request, runs it and writes the report or ``error.txt``.
The child's parts, each a ``child_*`` module imported only inside a child process: `child_entry` (loading and
running the entry), `child_source` (constructors recorded and written as source), `child_observe` (the module
calls observed), `child_profile` (the profiled run and its timing), `child_attribute` (time given to instances,
classes and ops) and `child_capture` (the hot instances' captures, on disk).
"""

from __future__ import annotations

import sys

from .child_entry import user_traceback
from .child_profile import run
from .requests import HotspotRequest


def main(argv: list[str]) -> int:
    req = HotspotRequest.read(argv[1])
    out = req.out
    out.mkdir(parents=True, exist_ok=True)
    try:
        report = run(req)
    except SystemExit as exc:
        if isinstance(exc.code, str):
            (out / "error.txt").write_text(exc.code)
            return 3
        raise
    except BaseException as exc:  # noqa: BLE001 - the user's model failed: say where, in its own words
        (out / "error.txt").write_text(f"{type(exc).__name__}: {exc}\n\n{user_traceback(exc)}")
        return 3
    (out / "report.json").write_text(report.model_dump_json(indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
