"""`forge-lsp` entry point: stdio by default (``--stdio`` accepted, as editors pass it), ``--tcp`` for
debugging. A bad argument prints the usage and exits with status 2 before anything starts."""

from __future__ import annotations

import argparse
import logging
import os
import sys


def parse_args(argv: list[str]) -> argparse.Namespace:
    from .. import __version__

    parser = argparse.ArgumentParser(prog="forge-lsp", description="The forge language server.")
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default)")
    transport.add_argument("--tcp", action="store_true", help="listen on TCP (for debugging)")
    parser.add_argument("--host", help="address to bind with --tcp (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port to bind with --tcp (default 8888)")
    # vscode-languageclient passes its process id to node servers; accepted so any client's launch works
    parser.add_argument("--clientProcessId", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--version", action="version", version=f"forge-lsp {__version__}")
    args = parser.parse_args(argv)
    if not args.tcp and (args.host is not None or args.port is not None):
        parser.error("--host and --port go with --tcp")
    args.host = args.host or "127.0.0.1"
    args.port = 8888 if args.port is None else args.port
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)  # exits 2 with the usage on a bad argument

    from .app import create_server

    # stdout is the protocol stream: logs go to stderr (or $FORGE_LSP_LOG)
    handler = (
        logging.FileHandler(os.environ["FORGE_LSP_LOG"])
        if os.environ.get("FORGE_LSP_LOG")
        else logging.StreamHandler(sys.stderr)
    )
    level = os.environ.get("FORGE_LSP_LOG_LEVEL", "INFO")
    logging.basicConfig(level=level, handlers=[handler], format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if level != "DEBUG":  # pygls logs every message body at INFO: slow, and megabytes in the editor's log
        logging.getLogger("pygls").setLevel(logging.WARNING)
    server = create_server()
    log = logging.getLogger("forge_lsp.server")
    code = 0
    try:
        # 0 when the client closes the stream or sends `exit` after `shutdown`; 1 for `exit` without it
        code = server.start_tcp(args.host, args.port) if args.tcp else server.start_io()
    except Exception:  # noqa: BLE001 - logged, then the workers are stopped below
        log.exception("the server stopped on an error")
        code = 1
    finally:
        # the session is over (exit, or the client gone): stop every job, kill every process it started, then
        # leave without waiting for job threads that may sit in a model call
        try:
            server.end_session(wait=0.5)
        except BaseException:  # noqa: BLE001 - leave all the same
            log.exception("ending the session")
        log.info("exiting with code %d", code)
        logging.shutdown()
        try:
            sys.stdout.flush()
        except (ValueError, OSError):  # pygls closes stdout on `exit`
            pass
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
