"""`forge-lsp` entry point: stdio by default, `--tcp --host H --port P` for debugging."""

from __future__ import annotations

import logging
import os
import sys


def main(argv: list[str] | None = None) -> int:
    from pygls.cli import start_server

    from .server import create_server

    # stdout is the protocol stream: logs go to stderr (or $FORGE_LSP_LOG)
    handler = logging.FileHandler(os.environ["FORGE_LSP_LOG"]) if os.environ.get("FORGE_LSP_LOG") else \
        logging.StreamHandler(sys.stderr)
    level = os.environ.get("FORGE_LSP_LOG_LEVEL", "INFO")
    logging.basicConfig(level=level, handlers=[handler], format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if level != "DEBUG":  # pygls logs every message body at INFO: slow, and megabytes in the editor's log
        logging.getLogger("pygls").setLevel(logging.WARNING)
    server = create_server()
    try:
        start_server(server, argv if argv is not None else sys.argv[1:])
    finally:
        # the client is gone (exit, or stdin closed): stop every job and kill its worker processes, then
        # leave without waiting for job threads that may sit in a model call
        server.shutdown_jobs()
        logging.shutdown()
        try:
            sys.stdout.flush()
        except (ValueError, OSError):  # pygls closes stdout on `exit`
            pass
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
