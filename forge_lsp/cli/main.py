"""`forge` command line entry point."""

from __future__ import annotations

import argparse
import sys

from . import eval_cmd, optimize_cmd, profile_cmd


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="forge", description="Compile, verify, time and optimize PyTorch kernels.")
    sub = ap.add_subparsers(dest="command", required=True)
    eval_cmd.add_parser(sub)
    profile_cmd.add_parser(sub)
    profile_cmd.add_explain_parser(sub)
    optimize_cmd.add_parsers(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
