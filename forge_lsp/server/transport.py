"""The wire: LSP's base protocol (``Content-Length`` header, blank line, JSON body) over stdio or TCP.

pygls's own reader trusts the header: a huge length makes it allocate the whole frame (MemoryError),
and a wrong or missing one leaves it waiting for a line end that may never come. This module owns
the framing instead, and a session (`session.py`) hands pygls only decoded messages (`messages.Dispatcher`):

- a frame over `MAX_FRAME_BYTES` is refused and logged; its bytes are skipped, up to the next header;
- a malformed header block, junk between frames, or a body shorter or longer than its header says are
  resynchronized on the next ``Content-Length:`` header as soon as it arrives (a ``Content-Length: N``
  line ending in CRLF never occurs inside a JSON text, so it always starts a frame);
- a body without a usable header whose JSON can still be read and is a request gets an error reply
  with its id; anything whose id cannot be known gets no reply.

`FrameDecoder` is pure (bytes in, events out); `FrameWriter` writes frames; `session.serve_stdio` and
`session.serve_tcp` run a session with them on an asyncio loop of their own.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

log = logging.getLogger("forge_lsp.server.transport")


class Served(Protocol):
    """What the wire needs of the server it feeds (`server.ForgeServer`, which the wire does not import): its
    JSON-RPC protocol, and the slot for the event loop a session runs on."""

    protocol: Any
    loop: asyncio.AbstractEventLoop | None


MAX_FRAME_BYTES = 64 * 1024 * 1024  # larger frames are refused (a 2 MB document is already an edge case)
MAX_HEADER_BYTES = 8 * 1024  # one header block
MAX_UNFRAMED_BYTES = 1024 * 1024  # a body without a usable header is read as JSON up to this size
READ_CHUNK = 64 * 1024
BACKLOG = 256  # decoded messages waiting for the event loop before the reader waits

# A header line starting a frame. Inside a JSON text a raw CR or LF is whitespace between tokens, never
# next to letters, so this (with its line end) can only be a header: the point to resynchronize on.
_FRAME_START = re.compile(rb"content-length:[ \t]*\d+[ \t]*\r?\n", re.I)
_LOOSE_START = re.compile(rb"content-length:", re.I)  # where junk may end (the line may still be coming)
# the buffer's end is a header line begun but not finished (its prefix: "Cont", "Content-Length: 4"...)
_PARTIAL_START = re.compile(
    rb"c(?:o(?:n(?:t(?:e(?:n(?:t(?:-(?:l(?:e(?:n(?:g(?:t(?:h(?::[ \t]*\d*[ \t]*\r?)?)?)?)?)?)?)?)?)?)?)?)?)?)?\Z", re.I
)
_LOOKBACK = 128  # a header line is shorter than this
_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]"
_HEADER_LINE = re.compile(rb"(" + _TOKEN + rb"+):[ \t]*(.*?)[ \t]*")
_PARTIAL_HEADER_LINE = re.compile(_TOKEN + rb"*(:[^\r\n]*)?\r?")
_BLOCK_END = re.compile(rb"\r?\n\r?\n")
_WHITESPACE = b" \t\r\n"


@dataclass(frozen=True)
class Message:
    """A frame's body, as sent (the dispatcher decodes it)."""

    body: bytes


@dataclass(frozen=True)
class Unframed:
    """A JSON request that arrived without a usable header: answered with an error, never run."""

    value: Any
    reason: str


Event = Message | Unframed


class FrameDecoder:
    """Splits a byte stream into frames. `feed` never raises and never waits for more than the frame in
    hand needs: a bad header costs only the bytes up to the next good one."""

    def __init__(self, limit: int = MAX_FRAME_BYTES) -> None:
        self.limit = limit
        self.buf = bytearray()
        self.state = "header"  # header | body | skip | unframed | resync
        self.length = 0  # body: the declared length; skip: the bytes still to skip
        self.scanned = 0  # body: how far the search for the next header got
        self.reason = ""  # unframed: what was wrong with the header
        self.dropped = 0  # resync: junk bytes dropped so far
        self.resync_from = 1  # resync: where the next header may start (0 once junk was dropped)
        self.frames = self.refused = self.resyncs = 0  # counters, for the log and the tests

    def feed(self, data: bytes) -> list[Event]:
        self.buf += data
        events: list[Event] = []
        while self._step(events):
            pass
        return events

    # ------------------------------------------------------------------------------ states
    def _step(self, events: list[Event]) -> bool:
        """One transition; False when more bytes are needed."""
        return getattr(self, f"_{self.state}")(events)

    def _header(self, events: list[Event]) -> bool:
        buf = self.buf
        start = 0
        while start < len(buf) and buf[start] in _WHITESPACE:  # CRLFs between frames are harmless
            start += 1
        del buf[:start]
        if not buf:
            return False
        if buf[:1] in (b"{", b"["):  # a body with no header at all
            return self._to_unframed("no Content-Length header")
        end = _BLOCK_END.search(buf, 0, MAX_HEADER_BYTES + 4)
        if end is None:
            if len(buf) > MAX_HEADER_BYTES or not self._plausible_partial_block(bytes(buf[:MAX_HEADER_BYTES])):
                return self._to_resync("junk where a header was expected")
            return False
        block = bytes(buf[: end.start()])
        lengths: list[bytes] = []
        for raw in block.split(b"\n"):
            line = raw.rstrip(b"\r")
            m = _HEADER_LINE.fullmatch(line)
            if m is None:
                return self._to_resync("junk where a header was expected")
            if m.group(1).lower() == b"content-length":
                lengths.append(m.group(2))
        del buf[: end.end()]
        if not lengths:
            return self._to_unframed("no Content-Length header")
        if len(set(lengths)) > 1:
            return self._to_unframed("conflicting Content-Length headers")
        value = lengths[0]
        if not value.isdigit():
            shown = value[:40].decode("ascii", "replace")
            return self._to_unframed(f"Content-Length {shown!r} is not a number")
        length = int(value)
        if length > self.limit:
            self.refused += 1
            log.warning(
                "refused a frame of %d bytes (the limit is %d MiB): its bytes are skipped up to the next header",
                length,
                self.limit // (1024 * 1024),
            )
            self.state, self.length = "skip", length
            return True
        self.state, self.length, self.scanned = "body", length, 0
        return True

    @staticmethod
    def _plausible_partial_block(block: bytes) -> bool:
        """Could these bytes still become a header block (complete lines, then the start of one)?"""
        *complete, last = block.split(b"\n")
        return all(_HEADER_LINE.fullmatch(line.rstrip(b"\r")) for line in complete) and bool(
            _PARTIAL_HEADER_LINE.fullmatch(last)
        )

    def _body(self, events: list[Event]) -> bool:
        buf, n = self.buf, self.length
        # a declared length that is too long runs into the next frame: its header line shows up before n
        m = _FRAME_START.search(buf, max(0, self.scanned - _LOOKBACK), min(len(buf), n + _LOOKBACK))
        if m is not None and m.start() < n:
            cut = m.start()
            log.warning("a frame declared %d bytes but the next header began after %d: resynchronized there", n, cut)
            self.resyncs += 1
            return self._deliver(events, cut)
        self.scanned = len(buf)
        if len(buf) < n:
            return False
        if len(buf) < n + _LOOKBACK:
            # the buffer ends in what may be a header begun before n (never the end of a JSON text): wait
            # for its line, to know whether the length ran into the next frame
            tail = _PARTIAL_START.search(buf, max(0, n - _LOOKBACK))
            if tail is not None and tail.start() < n:
                return False
        return self._deliver(events, n)

    def _deliver(self, events: list[Event], size: int) -> bool:
        events.append(Message(bytes(self.buf[:size])))
        del self.buf[:size]
        self.frames += 1
        self.state, self.scanned = "header", 0
        return True

    def _skip(self, events: list[Event]) -> bool:
        buf = self.buf
        m = _FRAME_START.search(buf, 0, min(len(buf), self.length + 64))
        if m is not None and m.start() < self.length:
            log.warning("skipped %d bytes of the refused frame; resynchronized on the next header", m.start())
            del buf[: m.start()]
            self.state = "header"
            return True
        if len(buf) >= self.length:
            del buf[: self.length]
            self.state = "header"
            return True
        drop = max(0, len(buf) - 64)  # keep a tail: a header may be split between reads
        del buf[:drop]
        self.length -= drop
        return False

    def _unframed(self, events: list[Event]) -> bool:
        buf = self.buf
        start = 0
        while start < len(buf) and buf[start] in _WHITESPACE:
            start += 1
        del buf[:start]
        if not buf:
            return False
        if buf[:1] not in (b"{", b"["):
            return self._to_resync(f"{self.reason}, and no JSON after it")
        text = bytes(buf[:MAX_UNFRAMED_BYTES]).decode("utf-8", "surrogateescape")
        try:
            value, end = json.JSONDecoder().raw_decode(text)
        except (ValueError, RecursionError):
            if _FRAME_START.search(buf) is not None or len(buf) > MAX_UNFRAMED_BYTES:
                return self._to_resync(f"{self.reason}, and its body is not JSON")
            return False  # the rest of the JSON may still be coming
        used = len(text[:end].encode("utf-8", "surrogateescape"))
        del buf[:used]
        self.resyncs += 1
        log.warning("a message arrived with %s: not read", self.reason)
        events.append(Unframed(value, self.reason))
        self.state = "header"
        return True

    def _resync(self, events: list[Event]) -> bool:
        buf = self.buf
        m = _LOOSE_START.search(buf, self.resync_from)
        if m is None:
            drop = max(0, len(buf) - 14)  # keep what may be the start of a split "Content-Length:"
            if drop:
                self.dropped += drop
                del buf[:drop]
                self.resync_from = 0
            return False
        self.dropped += m.start()
        del buf[: m.start()]
        log.warning("%s: dropped %d bytes up to the next Content-Length header", self.reason, self.dropped)
        self.resyncs += 1
        self.dropped = 0
        self.state = "header"
        return True

    def _to_unframed(self, reason: str) -> bool:
        self.state, self.reason = "unframed", reason
        return True

    def _to_resync(self, reason: str) -> bool:
        self.state, self.reason, self.dropped, self.resync_from = "resync", reason, 0, 1
        return True


# ------------------------------------------------------------------------------------- writing
class FrameWriter:
    """Writes framed messages to a byte stream from any thread, one frame at a time. A client that went
    away is noticed once (`on_lost`), then writes are dropped: the session is ending anyway."""

    def __init__(self, write: Callable[[bytes], Any], close: Callable[[], Any], on_lost: Callable[[], Any]) -> None:
        self._write, self._close, self._on_lost = write, close, on_lost
        self._lock = threading.Lock()
        self.closed = False

    def write(self, data: bytes) -> None:
        """pygls's writer interface: `data` is a complete frame."""
        with self._lock:
            if self.closed:
                return
            try:
                self._write(data)
            except (OSError, ValueError, RuntimeError) as exc:
                self.closed = True
                log.info("the client is gone (%s)", exc)
                self._on_lost()

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message, ensure_ascii=False).encode("utf-8")
        self.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            try:
                self._close()
            except (OSError, ValueError, RuntimeError):
                pass
