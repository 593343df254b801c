"""Soak: one server over stdio under random traffic for FORGE_SOAK_SECONDS (default 120) — valid and invalid
requests, broken frames, edits, opens and closes, runs that start against a scripted model and are
cancelled or finish — then it must still answer, hold at most 150 MB, have answered every request exactly
once without an internal error, and leave no process behind.

FORGE_SOAK_SEED picks the traffic; FORGE_SOAK_REPORT names a JSON file for the figures (BENCHMARKS.md).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from lsp_session import scripted_settings
from test_server_faults import (
    BAD_PARAMS,
    FAST,
    MISSING,
    PROGRESS,
    TASK,
    RawClient,
    cmdline,
    coder,
    descendants,
    frame,
    running,
)

pytest_plugins = ["fake_openai"]

SECONDS = float(os.environ.get("FORGE_SOAK_SECONDS", "120"))
RSS_LIMIT_MB = 150
pytestmark = [pytest.mark.slow, pytest.mark.timeout(int(SECONDS) + 600)]

BROKEN = "import torch.nn as nn\n\nclass Broken(nn.Module):\n    def forward(self, x:\n"


def work_processes(pid: int) -> list[int]:
    """The server's descendants but the sandbox's guardian and the CPU workers' zygote (each lives as long as the
    server, by design, and runs no work: a worker the zygote forked is its child, so still counted here)."""
    return [p for p in descendants(pid) if not any(k in cmdline(p) for k in ("forge-lsp guardian", "zygote_child"))]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Soak:
    def __init__(self, client: RawClient, uris: list[str], rng: random.Random) -> None:
        self.c, self.uris, self.rng = client, uris, rng
        self.expected: set[int] = set()  # request ids that must get exactly one reply
        self.what: dict[int, str] = {}  # what each of them was (to say which went unanswered)
        # at most one reply: a request without a usable header is answered when it comes after a good frame,
        # but after junk (a body cut short just before) it is junk too, and its id cannot be known
        self.optional: set[int] = set()
        self.null_errors = 0  # replies with id null expected (parse errors of bodies we broke)
        self.stats: Counter[str] = Counter()
        self.jobs: set[str] = set()

    # -- sending
    def request(self, method: str, params: Any = MISSING) -> int:
        msg_id = self.c.request(method, params)
        self.expected.add(msg_id)
        self.what[msg_id] = f"{method} {json.dumps(params, default=str)[:200]}"
        self.stats["requests"] += 1
        return msg_id

    def text(self, uri: str) -> str:
        return self.c.docs[uri]["text"]

    def line(self, uri: str) -> int:
        return self.rng.randrange(max(1, self.text(uri).count("\n")))

    # -- actions
    def read(self) -> None:
        uri = self.rng.choice(self.uris)
        pos = {"line": self.line(uri), "character": self.rng.randrange(12)}
        doc = {"uri": uri}
        kind = self.rng.randrange(5)
        if kind == 0:
            self.request("textDocument/hover", {"textDocument": doc, "position": pos})
        elif kind == 1:
            self.request("textDocument/codeLens", {"textDocument": doc})
        elif kind == 2:
            rng = {"start": pos, "end": pos}
            self.request("textDocument/codeAction", {"textDocument": doc, "range": rng, "context": {"diagnostics": []}})
        elif kind == 3:
            self.request("forge/runs", None)
        else:
            self.request("forge/run", {"runId": self.rng.choice(["nope", "", "../x"])})

    def bad_params(self) -> None:
        method, params = self.rng.choice(BAD_PARAMS)
        self.request(method, params)

    def bad_frame(self) -> None:
        self.stats["bad_frames"] += 1
        self.c.next_id += 1
        msg_id = self.c.next_id
        body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "forge/runs", "params": None}).encode()
        kind = self.rng.randrange(8)
        if kind == 0:  # junk, then the request: answered
            data = self.rng.choice([b"garbage\r\n", b"\x00\xff", b'"}}', b"\r\n\r\n"]) + frame(json.loads(body))
            self.expected.add(msg_id)
        elif kind == 1:  # too short: a parse error (id null), the rest is junk
            data = b"Content-Length: %d\r\n\r\n" % (len(body) // 2) + body
            self.null_errors += 1
        elif kind == 2:  # too long: cut at the next header, answered
            data = b"Content-Length: %d\r\n\r\n" % (len(body) + 17) + body + frame({"jsonrpc": "2.0", "method": "$/x"})
            self.expected.add(msg_id)
        elif kind == 3:  # no usable length: -32600 with its id
            data = self.rng.choice([b"Content-Length: x\r\n\r\n", b"Content-Type: a\r\n\r\n", b""]) + body
            self.optional.add(msg_id)
        elif kind == 4:  # not JSON: a parse error (id null)
            data = frame_bytes(b'{"jsonrpc": "2.0", "id": ' + str(msg_id).encode())
            self.null_errors += 1
        elif kind == 5:  # oversized: refused, nothing answered
            data = b"Content-Length: 99999999999\r\n\r\n" + body
        elif kind == 6:  # an unknown method: -32601
            data = frame({"jsonrpc": "2.0", "id": msg_id, "method": "forge/nothing", "params": {}})
            self.expected.add(msg_id)
        else:  # a bad envelope: -32600
            data = frame({"jsonrpc": "1.0", "id": msg_id, "method": "forge/runs"})
            self.expected.add(msg_id)
        self.what[msg_id] = f"bad frame {kind}: {data[:300]!r}"
        self.c.send_bytes(data)

    def edit(self) -> None:
        uri = self.rng.choice(self.uris)
        text = self.text(uri)
        kind = self.rng.randrange(4)
        if kind == 0:
            lines = text.splitlines(keepends=True)
            lines.insert(self.rng.randrange(len(lines) + 1), f"# soak {self.rng.random()}\n")
            text = "".join(lines)
        elif kind == 1:
            text = text.replace("dim = 32", "dim = 48") if "dim = 32" in text else text.replace("dim = 48", "dim = 32")
        elif kind == 2:
            text = text + "def broken(:\n" if "def broken(:" not in text else text.replace("def broken(:\n", "")
        else:
            text = TASK if uri.endswith(("a.py", "b.py")) else BROKEN
        self.c.edit(uri, text)
        self.stats["edits"] += 1

    def start_run(self) -> None:
        uri = self.rng.choice(self.uris[:2])
        reply = self.c.call("workspace/executeCommand", {"command": "forge.optimize", "arguments": [uri, "Model"]})
        self.expected.add(self.c.next_id)
        self.stats["requests"] += 1
        job = reply.get("result", {}).get("job")
        if job:
            self.jobs.add(job)
            self.stats["runs_started"] += 1

    def cancel(self) -> None:
        if not self.jobs:
            return
        job = self.rng.choice(sorted(self.jobs))
        if self.rng.random() < 0.5:
            self.request("workspace/executeCommand", {"command": "forge.cancel", "arguments": [job]})
        else:
            self.c.notify("window/workDoneProgress/cancel", {"token": f"forge/{job}"})
        self.stats["cancels"] += 1

    def proposals(self) -> None:
        runs = self.c.call("forge/runs", None).get("result", {}).get("runs", [])
        self.expected.add(self.c.next_id)
        self.stats["requests"] += 1
        offers = [j["proposal"] for j in runs if j.get("proposal")]
        if not offers:
            return
        p = self.rng.choice(offers)
        args = [p["uri"], p["className"], p["runId"], p["candidateId"]]
        if self.rng.random() < 0.5:
            self.request(
                "workspace/executeCommand", {"command": "forge.showDiff", "arguments": [*args, {"show": False}]}
            )
        else:
            self.request("workspace/executeCommand", {"command": "forge.reject", "arguments": args})
            self.stats["rejects"] += 1

    def reopen(self) -> None:
        uri = self.rng.choice(self.uris)
        self.c.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        doc = self.c.docs[uri]
        doc["version"] += 1
        self.c.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "python", "version": doc["version"], "text": doc["text"]}},
        )


def frame_bytes(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def test_soak(tmp_path, fake_openai):
    rng = random.Random(int(os.environ.get("FORGE_SOAK_SEED", "1")))

    def model_reply(_body: Any) -> dict[str, Any]:
        roll = rng.random()
        if roll < 0.1:
            return {"status": 500, "error": "the scripted model had a bad moment"}
        if roll < 0.2:
            return {"delay": rng.uniform(0, 2), "content": "this is not the JSON you asked for"}
        source = FAST + f"\n# variant {rng.randrange(4)}\n"
        return {"delay": rng.uniform(0, 3), "content": coder(source, "vectorized")}

    fake_openai.script(*[model_reply] * 200_000)
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text(TASK)
    (tmp_path / "broken.py").write_text(BROKEN)
    c = RawClient(tmp_path, light=True)
    try:
        c.initialize(tmp_path, PROGRESS, scripted_settings(fake_openai.base_url, workers=2))
        uris = [c.open(tmp_path / n) for n in ("a.py", "b.py", "broken.py")]
        soak = Soak(c, uris, rng)
        actions = [
            (soak.read, 30),
            (soak.bad_params, 12),
            (soak.bad_frame, 10),
            (soak.edit, 20),
            (soak.start_run, 4),
            (soak.cancel, 3),
            (soak.proposals, 2),
            (soak.reopen, 3),
        ]
        funcs, weights = zip(*actions, strict=True)
        started = time.monotonic()
        deadline = started + SECONDS
        seen: set[int] = set()
        peak_rss = 0.0
        timeline: list[tuple[int, float]] = []  # (second, RSS MB), one a minute
        next_check = started
        while time.monotonic() < deadline:
            rng.choices(funcs, weights)[0]()
            time.sleep(rng.uniform(0, 0.02))
            if time.monotonic() >= next_check:  # alive, and what it runs is noted for the end
                next_check = time.monotonic() + 5
                c.alive_and_answering()
                soak.expected.add(c.next_id)
                seen.update(descendants(c.proc.pid))
                now_rss = rss_mb(c.proc.pid)
                peak_rss = max(peak_rss, now_rss)
                if not timeline or time.monotonic() - started - timeline[-1][0] >= 60:
                    timeline.append((round(time.monotonic() - started), round(now_rss, 1)))
        # wind down: cancel what runs, then every request must have had its one reply
        soak.request("workspace/executeCommand", {"command": "forge.cancel", "arguments": []})
        c.wait(
            lambda: not any(j["status"] in ("queued", "running") for j in c.call("forge/runs", None)["result"]["runs"]),
            120,
            "the jobs to stop",
        )
        try:
            c.wait(lambda: all(c.replies(i) for i in soak.expected), 60, "every reply")
        except AssertionError:
            missing = sorted(i for i in soak.expected if not c.replies(i))
            raise AssertionError(
                f"{len(missing)} unanswered: {[(i, soak.what.get(i)) for i in missing[:10]]}"
            ) from None
        time.sleep(1.0)
        duplicated = [i for i in soak.expected if len(c.replies(i)) != 1]
        duplicated += [i for i in soak.optional if len(c.replies(i)) > 1]
        codes = Counter((m.get("error") or {}).get("code", "result") for replies in c.by_id.values() for m in replies)
        try:
            c.wait(lambda: not work_processes(c.proc.pid), 60, "the workers to go once the runs are cancelled")
        except AssertionError:
            left = [(p, cmdline(p)[:200]) for p in work_processes(c.proc.pid)]
            raise AssertionError(f"left running: {left}; jobs: {c.call('forge/runs', None)}") from None
        c.alive_and_answering()
        rss = rss_mb(c.proc.pid)
        peak_rss = max(peak_rss, rss)
        seen.update(descendants(c.proc.pid))
        c.call("shutdown")
        c.notify("exit")
        code = c.proc.wait(timeout=30)
        time.sleep(1.0)
        leftover = sorted(running(seen))
        report = {
            "seconds": round(time.monotonic() - started),
            "requests_needing_a_reply": len(soak.expected),
            "headerless_requests_answered": sum(1 for i in soak.optional if c.replies(i)),
            "headerless_requests": len(soak.optional),
            "frames_broken_on_purpose": soak.stats["bad_frames"],
            "replies": sum(len(v) for v in c.by_id.values()),
            "reply_codes": {str(k): v for k, v in sorted(codes.items(), key=lambda kv: str(kv[0]))},
            "edits": soak.stats["edits"],
            "runs_started": soak.stats["runs_started"],
            "cancels": soak.stats["cancels"],
            "rejects": soak.stats["rejects"],
            "notifications": dict(c.counts),
            "child_processes_seen": len(seen),
            "rss_mb_end": round(rss, 1),
            "rss_mb_peak": round(peak_rss, 1),
            "rss_mb_timeline": timeline,
            "exit_code": code,
            "leftover_processes": leftover,
        }
        print("SOAK", json.dumps(report))
        if os.environ.get("FORGE_SOAK_REPORT"):
            Path(os.environ["FORGE_SOAK_REPORT"]).write_text(json.dumps(report, indent=2))
        assert not duplicated, duplicated[:20]
        assert codes.get(-32603, 0) == 0, "internal errors: " + c.log()[-4000:]
        assert codes.get(None, 0) == 0  # every error carries a code
        assert soak.stats["runs_started"] > 0
        assert rss <= RSS_LIMIT_MB, rss
        assert len(c.replies(None)) == soak.null_errors  # one parse error per body broken on purpose
        assert code == 0 and not leftover, (code, leftover)
    finally:
        c.close()
