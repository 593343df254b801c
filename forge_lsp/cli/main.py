"""`forge` command line entry point.

SIGTERM and SIGHUP (CI, `timeout`, an IDE, a closed terminal) kill every child process tree forge
started (`forge_lsp.sandbox.kill_all`: workers, builders, the graph probe, profilers, and what they
started), then unwind like Ctrl-C (a run is marked resumable) and exit with 128 + the signal's number.
SIGKILL cannot be handled: the children then die by `forge_lsp.sandbox`'s own means.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any

from .. import __version__, sandbox
from . import eval_cmd, hotspots_cmd, optimize_cmd, profile_cmd, report_cmd

#: Signals that end `forge` with its children: the exit status is 128 + the signal's number.
TERMINATING = (signal.SIGTERM, signal.SIGHUP)
#: Seconds the unwinding after such a signal may take before the process exits regardless.
EXIT_GRACE_S = 3.0


class Terminated(KeyboardInterrupt):
    """Raised in the main thread by SIGTERM or SIGHUP, once every child tree is dead; unwinds like Ctrl-C."""

    def __init__(self, signo: int) -> None:
        super().__init__(signo)
        self.signo = signo


_received: list[int] = []  # the terminating signal received, if any
_timers: list[threading.Timer] = []  # the exit that comes anyway if unwinding hangs


def _on_terminate(signo: int, frame: FrameType | None) -> None:
    sandbox.kill_all(wait=0.5)
    if _received:  # already unwinding: the children are dead again, nothing else to do
        return
    _received.append(signo)
    timer = threading.Timer(EXIT_GRACE_S, os._exit, args=(128 + signo,))
    timer.daemon = True
    timer.start()
    _timers.append(timer)
    raise Terminated(signo)


def install_signal_handlers() -> dict[int, Any]:
    """Handle SIGTERM and SIGHUP as described above; returns the handlers they replace (main thread only)."""
    _received.clear()
    return {int(s): signal.signal(s, _on_terminate) for s in TERMINATING}


def restore_signal_handlers(previous: dict[int, Any]) -> None:
    for signo, handler in previous.items():
        signal.signal(signo, handler if handler is not None else signal.SIG_DFL)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="forge", description="Compile, verify, time and optimize PyTorch kernels.")
    ap.add_argument("--version", action="version", version=f"forge {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)
    eval_cmd.add_parser(sub)
    profile_cmd.add_parser(sub)
    profile_cmd.add_explain_parser(sub)
    optimize_cmd.add_parsers(sub)
    hotspots_cmd.add_parser(sub)
    report_cmd.add_parser(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = install_signal_handlers() if in_main_thread else {}
    try:
        code = int(args.func(args) or 0)
    except KeyboardInterrupt:
        code = 130
        if not _received:
            print("interrupted", file=sys.stderr)
    finally:
        if in_main_thread:
            restore_signal_handlers(previous)
    for timer in _timers:
        timer.cancel()
    _timers.clear()
    if _received:
        signo = _received[0]
        print(f"terminated by {signal.Signals(signo).name}", file=sys.stderr)
        return 128 + signo
    return code


if __name__ == "__main__":
    sys.exit(main())
