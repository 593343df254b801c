"""The wire's framing (`server/transport.py`'s `FrameDecoder`) in this process, bytes in and events out: what
`test_server_faults.py` shows through a server process, here without one (the fast loop's layer)."""

from __future__ import annotations

import json
import random

import pytest

from forge_lsp.server.transport import FrameDecoder, Message, Unframed


def frame(obj: object) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def bodies(events) -> list[object]:
    return [json.loads(e.body) for e in events if isinstance(e, Message)]


REQS = [{"jsonrpc": "2.0", "id": i, "method": "m", "params": {"text": "x" * (i * 37)}} for i in range(6)]


def test_frames_in_one_chunk_come_out_whole_and_in_order():
    d = FrameDecoder()
    assert bodies(d.feed(b"".join(frame(r) for r in REQS))) == REQS
    assert d.frames == len(REQS) and d.resyncs == 0


@pytest.mark.parametrize("seed", range(5))
def test_frames_split_anywhere_are_read_whole(seed):
    data = b"".join(frame(r) for r in REQS)
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(data)), 20))
    d = FrameDecoder()
    out = []
    for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True):
        out += d.feed(data[a:b])
    assert bodies(out) == REQS


def test_a_frame_over_the_limit_is_refused_and_the_next_one_read():
    d = FrameDecoder(limit=100)
    big = frame({"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"text": "y" * 500}})
    assert bodies(d.feed(big + frame(REQS[0]))) == [REQS[0]]
    assert d.refused == 1


def test_a_huge_declared_length_allocates_nothing_and_the_next_header_resynchronizes():
    d = FrameDecoder(limit=1 << 20)
    out = d.feed(b"Content-Length: 99999999999\r\n\r\n{}" + frame(REQS[1]))
    assert bodies(out) == [REQS[1]]
    assert len(d.buf) < 1024


def test_a_body_shorter_than_its_header_says_is_cut_at_the_next_header():
    d = FrameDecoder()
    short = b'Content-Length: 500\r\n\r\n{"jsonrpc": "2.0", "id": 9, "method": "m"}'
    out = d.feed(short + frame(REQS[2]))
    assert REQS[2] in bodies(out) and d.resyncs >= 1


def test_junk_between_frames_is_skipped():
    d = FrameDecoder()
    out = d.feed(frame(REQS[0]) + b"garbage that is no header at all" + frame(REQS[3]))
    assert bodies(out) == [REQS[0], REQS[3]]


def test_a_request_without_a_header_is_an_unframed_event_and_the_next_frame_is_read():
    d = FrameDecoder()
    out = d.feed(b'Content-Type: text/plain\r\n\r\n{"jsonrpc": "2.0", "id": 4, "method": "m"}' + frame(REQS[4]))
    unframed = [e for e in out if isinstance(e, Unframed)]
    assert len(unframed) == 1 and unframed[0].value["id"] == 4
    assert bodies(out) == [REQS[4]]


def test_a_partial_header_waits_for_its_line():
    d = FrameDecoder()
    data = frame(REQS[5])
    assert d.feed(data[:9]) == []  # "Content-L"
    assert bodies(d.feed(data[9:])) == [REQS[5]]
