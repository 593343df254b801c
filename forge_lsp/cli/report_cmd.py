"""`forge report RUN [-o FILE.html] [--open]`, `forge report --model-wide [STAMP]`: one self-contained HTML page."""

from __future__ import annotations

import argparse
import sys
import webbrowser
from pathlib import Path


def add_parser(sub) -> None:
    p = sub.add_parser(
        "report",
        help="write one self-contained HTML report of a run (tree, charts, roofline, every candidate)",
        description="Render RUN (a run id, a unique prefix of one, or 'latest') from .forge/runs.sqlite as one HTML "
        "file with everything inlined: it makes no network request and opens from file://. A run still going on "
        "is reported as it stands. With --model-wide, render a model-wide result (.forge/model_wide/<stamp>/) and "
        "the report of each of its modules' runs beside it.",
    )
    p.add_argument("run", nargs="?", default="latest", help="run id or unique prefix, or 'latest' (default)")
    p.add_argument(
        "--model-wide",
        nargs="?",
        const="latest",
        metavar="STAMP",
        help="render a model-wide result instead (its folder name under .forge/model_wide/, or 'latest')",
    )
    p.add_argument("-o", "--output", type=Path, help="the HTML file (default .forge/reports/<run>.html)")
    p.add_argument("--open", action="store_true", help="open it in the default browser")
    p.add_argument("--workspace", type=Path, default=Path.cwd(), help="where .forge/ lives (default: here)")
    p.add_argument("--cache-dir", type=Path, help="forge's cache (for the device's measured roofline peaks)")
    p.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    from ..usecases import UseCaseError
    from ..usecases.report import write_model_wide_report, write_run_report

    try:
        if args.model_wide is not None:
            result = write_model_wide_report(args.workspace, args.model_wide, args.output, args.cache_dir)
        else:
            result = write_run_report(args.workspace, args.run, args.output, args.cache_dir)
    except UseCaseError as exc:
        print(f"forge report: {exc}", file=sys.stderr)
        return 2
    what = f"model-wide result {result.run_id}" if args.model_wide is not None else f"run {result.run_id}"
    extra = " (in progress: as it stands now)" if result.in_progress else ""
    print(
        f"{result.path}  ({what}{extra}, {result.bytes / 1e6:.2f} MB, {result.seconds:.2f} s)",
        file=sys.stdout,
    )
    for path in result.also:
        print(f"{path}", file=sys.stdout)
    if args.open:
        webbrowser.open(result.path.resolve().as_uri())
    return 0
