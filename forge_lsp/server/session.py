"""A client's session: the wire's framing (`transport.py`) read and written on a thread of its own, each message
handed to the envelope's `Dispatcher` (`messages.py`) on the server's event loop, over stdio or one TCP client at a
time. The one module that knows both sides of the wire, so neither imports the other."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import IO

from .messages import Dispatcher
from .transport import BACKLOG, READ_CHUNK, Event, FrameDecoder, FrameWriter, Served

log = logging.getLogger("forge_lsp.server.session")


def _new_loop(server: Served) -> asyncio.AbstractEventLoop:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    server.loop = loop
    return loop


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what still runs on the loop and close it, without waiting for executor threads (a scan or a
    handler in a thread must not hold the exit up: the jobs and their workers are stopped by the caller)."""
    try:
        tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            loop.run_until_complete(asyncio.wait(tasks, timeout=1.0))
    except Exception:  # noqa: BLE001 - closing down: nothing left to report to
        log.debug("closing the loop", exc_info=True)
    finally:
        loop.close()
        asyncio.set_event_loop(None)


def serve_stdio(server: Served, stdin: IO[bytes], stdout: IO[bytes]) -> int:
    """One session over stdin/stdout until the client sends `exit` or closes stdin; the exit code."""
    loop = _new_loop(server)
    done: asyncio.Future[int] = loop.create_future()

    def finish(code: int) -> None:
        if not done.done():
            done.set_result(code)

    def lost() -> None:
        try:
            loop.call_soon_threadsafe(finish, 0)
        except RuntimeError:  # the loop is closed already
            pass

    def write(data: bytes) -> None:
        stdout.write(data)
        stdout.flush()

    writer = FrameWriter(write, stdout.close, lost)
    dispatcher = Dispatcher(server, writer, on_exit=finish)
    server.protocol.set_writer(writer)
    backlog = threading.Semaphore(BACKLOG)
    queue: asyncio.Queue[Event | None] = asyncio.Queue()

    async def consume() -> None:
        """Messages in order, one per turn of the loop: a handler's task takes its first step before the
        next message is handled (as with pygls's own reader), so `initialized` sets up before `didOpen`."""
        while not done.done():
            event = await queue.get()
            backlog.release()
            if event is None:
                log.info("stdin closed: the client is gone")
                finish(0)
                return
            dispatcher.handle(event)
            await asyncio.sleep(0)

    def read() -> None:
        """The reader thread: raw reads (never a readline that waits for a line end), framing, then the
        events to the loop in order."""
        decoder = FrameDecoder()
        fd = stdin.fileno()
        while True:
            try:
                data = os.read(fd, READ_CHUNK)
            except OSError as exc:
                log.info("reading stdin failed: %s", exc)
                data = b""
            events: list[Event | None] = list(decoder.feed(data)) if data else [None]
            for event in events:
                backlog.acquire()
                try:
                    loop.call_soon_threadsafe(queue.put_nowait, event)
                except RuntimeError:  # the loop is closed: the session is over
                    return
            if not data:
                return

    threading.Thread(target=read, name="forge-lsp-stdin", daemon=True).start()
    consumer = loop.create_task(consume())
    try:
        return loop.run_until_complete(done)
    except KeyboardInterrupt:
        return 0
    finally:
        consumer.cancel()
        _close_loop(loop)


def serve_tcp(server: Served, host: str, port: int) -> int:
    """Listen on host:port and serve the first client until it sends `exit` or disconnects (debugging)."""
    loop = _new_loop(server)
    done: asyncio.Future[int] = loop.create_future()

    def finish(code: int) -> None:
        if not done.done():
            done.set_result(code)

    async def session(reader: asyncio.StreamReader, stream: asyncio.StreamWriter) -> None:
        if server.protocol.writer is not None:  # one client at a time, as a stdio session
            stream.close()
            return
        writer = FrameWriter(stream.write, stream.close, lambda: finish(0))
        dispatcher = Dispatcher(server, writer, on_exit=finish)
        server.protocol.set_writer(writer)
        decoder = FrameDecoder()
        try:
            while not done.done():
                data = await reader.read(READ_CHUNK)
                if not data:
                    break
                for event in decoder.feed(data):
                    dispatcher.handle(event)
                    await asyncio.sleep(0)  # as on stdio: a handler's task starts before the next message
        except (ConnectionError, OSError) as exc:
            log.info("the TCP client is gone: %s", exc)
        finish(0)

    async def main() -> int:
        listener = await asyncio.start_server(session, host, port)
        log.info("serving on %s", ", ".join(str(s.getsockname()) for s in listener.sockets))
        async with listener:
            return await done

    try:
        return loop.run_until_complete(main())
    except KeyboardInterrupt:
        return 0
    finally:
        _close_loop(loop)
