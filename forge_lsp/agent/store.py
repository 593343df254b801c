"""The run store: every optimization run, candidate, model call and event, in SQLite.

One database per workspace (``<workspace>/.forge/runs.sqlite``, WAL mode, so the CLI, the
language server and reports can read while a run writes). What is stored is what a person
needs to audit or resume a run: the task, the configuration minus secrets, every prompt and
reply, every candidate's source, verdict and timings, profiler findings, token usage and cost,
and the tree (each candidate's parent). Text fields pass through `scrub`, which blanks the
values of secret-looking environment variables, so a key that leaked into a prompt or a log
never reaches the disk.

Typed data in, typed data out (dataclasses; a candidate's verdict is the engine's `Verdict`, read
back from its JSON; an event is its `run_events` model, read back by `parse_event`); nothing here knows
about editors or models.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..engine.verdict import Verdict
from .run_events import AnyEvent, Event, ModelCall, Round, parse_event

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    task_path TEXT NOT NULL,
    model_class TEXT NOT NULL,
    task_source TEXT NOT NULL,
    task_sha TEXT NOT NULL,
    config_json TEXT NOT NULL,
    status TEXT NOT NULL,
    message TEXT NOT NULL DEFAULT '',
    best_candidate TEXT
);
CREATE TABLE IF NOT EXISTS candidates (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    parent_id TEXT,
    seq INTEGER NOT NULL,
    origin TEXT NOT NULL,
    summary TEXT NOT NULL,
    instruction TEXT NOT NULL DEFAULT '',
    source TEXT NOT NULL,
    source_sha TEXT NOT NULL,
    status TEXT NOT NULL,
    verdict_json TEXT,
    speedup REAL,
    correct INTEGER,
    findings_json TEXT,
    created REAL NOT NULL,
    evaluated REAL
);
CREATE INDEX IF NOT EXISTS candidates_run ON candidates(run_id, seq);
CREATE TABLE IF NOT EXISTS calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(id),
    candidate_id TEXT,
    role TEXT NOT NULL,
    model TEXT NOT NULL,
    messages_json TEXT NOT NULL,
    reply_text TEXT NOT NULL,
    parsed_json TEXT,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL,
    latency_s REAL NOT NULL DEFAULT 0,
    error TEXT,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS calls_run ON calls(run_id);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    ts REAL NOT NULL,
    kind TEXT NOT NULL,
    data_json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_run ON events(run_id, id);
"""

#: Environment variable names whose values are secrets (their values are blanked in stored text).
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
REDACTED = "[redacted]"


def secret_values(environ: dict[str, str] | None = None) -> list[str]:
    """Values of secret-looking environment variables, longest first (8 characters or more)."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if SECRET_NAME.search(k) and len(v) >= 8}
    return sorted(values, key=len, reverse=True)


def scrub(text: str, secrets: list[str] | None = None) -> str:
    """`text` with every secret value replaced by ``[redacted]``."""
    for value in secret_values() if secrets is None else secrets:
        text = text.replace(value, REDACTED)
    return text


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class RunRecord:
    id: str
    created: float
    updated: float
    task_path: str
    model_class: str
    task_source: str
    task_sha: str
    config: dict[str, Any]
    status: str
    message: str
    best_candidate: str | None


@dataclass
class CandidateRecord:
    id: str
    run_id: str
    parent_id: str | None
    seq: int
    origin: str
    summary: str
    instruction: str
    source: str
    source_sha: str
    status: str  # queued | evaluated
    verdict: Verdict | None = None
    speedup: float | None = None
    correct: bool | None = None
    findings: list[dict[str, Any]] | None = None
    created: float = 0.0
    evaluated: float | None = None


@dataclass
class CallRecord:
    id: int
    run_id: str
    candidate_id: str | None
    role: str
    model: str
    messages: list[dict[str, Any]]
    reply_text: str
    parsed: dict[str, Any] | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    latency_s: float
    error: str | None
    created: float


@dataclass
class EventRecord:
    """One event of a run as the store keeps it (`id` 0: not stored, an event only live consumers see)."""

    id: int
    run_id: str
    ts: float
    event: AnyEvent

    @property
    def kind(self) -> str:
        return self.event.kind


class RunStore:
    """Thread-safe access to one workspace's run database."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30.0)
        self._db.row_factory = sqlite3.Row
        try:
            self._initialize(deadline=time.monotonic() + 30.0)
        except BaseException:
            self._db.close()
            raise
        self._secrets = secret_values()

    def _initialize(self, deadline: float) -> None:
        """Switch to WAL and create the schema. SQLite answers "database is locked" at once, without waiting
        out the busy timeout, when two connections (the server's threads, or the server and a `forge` command)
        open a new database at the same moment and both ask for WAL; every step here is idempotent, so it is
        tried again until the deadline."""
        pause = 0.005
        while True:
            try:
                with self._lock, self._db:
                    self._db.execute("PRAGMA journal_mode=WAL")
                    self._db.execute("PRAGMA foreign_keys=ON")
                    self._db.executescript(_SCHEMA)
                    self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 0.25)

    @classmethod
    def for_workspace(cls, workspace: str | Path) -> RunStore:
        return cls(Path(workspace) / ".forge" / "runs.sqlite")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _scrub(self, text: str) -> str:
        return scrub(text, self._secrets)

    def _json(self, value: Any) -> str:
        return self._scrub(json.dumps(value, default=str))

    # ------------------------------------------------------------------------------------ runs
    def create_run(self, task_path: str | Path, model_class: str, task_source: str, config: dict[str, Any]) -> str:
        run_id = time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
        now = time.time()
        with self._lock, self._db:
            self._db.execute(
                "INSERT INTO runs (id, created, updated, task_path, model_class, task_source, task_sha, config_json,"
                " status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'running')",
                (
                    run_id,
                    now,
                    now,
                    str(task_path),
                    model_class,
                    self._scrub(task_source),
                    sha(task_source),
                    self._json(config),
                ),
            )
        return run_id

    def set_run_status(self, run_id: str, status: str, message: str = "", best_candidate: str | None = None) -> None:
        with self._lock, self._db:
            self._db.execute(
                "UPDATE runs SET status = ?, message = ?, best_candidate = COALESCE(?, best_candidate),"
                " updated = ? WHERE id = ?",
                (status, self._scrub(message), best_candidate, time.time(), run_id),
            )

    def get_run(self, run_id: str) -> RunRecord:
        with self._lock:
            row = self._db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:  # allow a unique prefix, as `forge show 2026` would
                rows = self._db.execute("SELECT * FROM runs WHERE id LIKE ?", (run_id + "%",)).fetchall()
                if len(rows) != 1:
                    raise KeyError(f"no run {run_id!r}" if not rows else f"run id {run_id!r} is ambiguous")
                row = rows[0]
        return _run(row)

    def list_runs(self, limit: int = 50) -> list[RunRecord]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM runs ORDER BY created DESC LIMIT ?", (limit,)).fetchall()
        return [_run(r) for r in rows]

    # ------------------------------------------------------------------------------ candidates
    def add_candidate(
        self, run_id: str, source: str, *, parent_id: str | None, origin: str, summary: str, instruction: str = ""
    ) -> CandidateRecord:
        now = time.time()
        with self._lock, self._db:
            seq = self._db.execute("SELECT COUNT(*) FROM candidates WHERE run_id = ?", (run_id,)).fetchone()[0] + 1
            cid = f"c{seq}"
            self._db.execute(
                "INSERT INTO candidates (id, run_id, parent_id, seq, origin, summary, instruction, source, source_sha,"
                " status, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?)",
                (
                    f"{run_id}/{cid}",
                    run_id,
                    parent_id,
                    seq,
                    origin,
                    self._scrub(summary),
                    self._scrub(instruction),
                    self._scrub(source),
                    sha(source),
                    now,
                ),
            )
        return self.get_candidate(f"{run_id}/{cid}")

    def set_verdict(self, candidate_id: str, verdict: Verdict, *, correct: bool, speedup: float | None) -> None:
        with self._lock, self._db:
            self._db.execute(
                "UPDATE candidates SET status = 'evaluated', verdict_json = ?, correct = ?, speedup = ?,"
                " evaluated = ? WHERE id = ?",
                (self._json(verdict.model_dump(mode="json")), int(correct), speedup, time.time(), candidate_id),
            )

    def set_findings(self, candidate_id: str, findings: list[dict[str, Any]]) -> None:
        with self._lock, self._db:
            self._db.execute(
                "UPDATE candidates SET findings_json = ? WHERE id = ?", (self._json(findings), candidate_id)
            )

    def get_candidate(self, candidate_id: str) -> CandidateRecord:
        with self._lock:
            row = self._db.execute("SELECT * FROM candidates WHERE id = ?", (candidate_id,)).fetchone()
        if row is None:
            raise KeyError(f"no candidate {candidate_id!r}")
        return _candidate(row)

    def candidates(self, run_id: str) -> list[CandidateRecord]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM candidates WHERE run_id = ? ORDER BY seq", (run_id,)).fetchall()
        return [_candidate(r) for r in rows]

    def evaluated_by_source(self, run_id: str, source: str) -> CandidateRecord | None:
        """An already evaluated candidate of this run with exactly this source (resume, duplicates)."""
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM candidates WHERE run_id = ? AND source_sha = ? AND status ="
                " 'evaluated' ORDER BY seq LIMIT 1",
                (run_id, sha(source)),
            ).fetchone()
        return _candidate(row) if row else None

    # ----------------------------------------------------------------------------------- calls
    def add_call(
        self,
        run_id: str,
        *,
        role: str,
        model: str,
        messages: list[dict[str, Any]],
        reply_text: str,
        parsed: dict[str, Any] | None,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cost_usd: float | None = None,
        latency_s: float = 0.0,
        error: str | None = None,
        candidate_id: str | None = None,
    ) -> int:
        with self._lock, self._db:
            cur = self._db.execute(
                "INSERT INTO calls (run_id, candidate_id, role, model, messages_json, reply_text, parsed_json,"
                " prompt_tokens, completion_tokens, cost_usd, latency_s, error, created)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    candidate_id,
                    role,
                    model,
                    self._json(messages),
                    self._scrub(reply_text),
                    self._json(parsed) if parsed is not None else None,
                    prompt_tokens,
                    completion_tokens,
                    cost_usd,
                    latency_s,
                    self._scrub(error) if error else None,
                    time.time(),
                ),
            )
            return cur.lastrowid or 0

    def calls(self, run_id: str) -> list[CallRecord]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM calls WHERE run_id = ? ORDER BY id", (run_id,)).fetchall()
        return [
            CallRecord(
                id=r["id"],
                run_id=r["run_id"],
                candidate_id=r["candidate_id"],
                role=r["role"],
                model=r["model"],
                messages=json.loads(r["messages_json"]),
                reply_text=r["reply_text"],
                parsed=json.loads(r["parsed_json"]) if r["parsed_json"] else None,
                prompt_tokens=r["prompt_tokens"],
                completion_tokens=r["completion_tokens"],
                cost_usd=r["cost_usd"],
                latency_s=r["latency_s"],
                error=r["error"],
                created=r["created"],
            )
            for r in rows
        ]

    def spent(self, run_id: str) -> tuple[float, int, int]:
        """(known dollars, prompt tokens, completion tokens) over all calls of the run."""
        with self._lock:
            row = self._db.execute(
                "SELECT COALESCE(SUM(cost_usd), 0), COALESCE(SUM(prompt_tokens), 0),"
                " COALESCE(SUM(completion_tokens), 0) FROM calls WHERE run_id = ?",
                (run_id,),
            ).fetchone()
        return float(row[0]), int(row[1]), int(row[2])

    # ---------------------------------------------------------------------------------- events
    def add_event(self, run_id: str, event: Event, ts: float | None = None) -> int:
        """Store one event (its kind, and its fields as JSON); its id."""
        with self._lock, self._db:
            cur = self._db.execute(
                "INSERT INTO events (run_id, ts, kind, data_json) VALUES (?, ?, ?, ?)",
                (run_id, ts or time.time(), event.kind, self._json(event.fields())),
            )
            return cur.lastrowid or 0

    def events(self, run_id: str, after: int = 0) -> list[EventRecord]:
        with self._lock:
            rows = self._db.execute(
                "SELECT * FROM events WHERE run_id = ? AND id > ? ORDER BY id", (run_id, after)
            ).fetchall()
        return [
            EventRecord(
                id=r["id"], run_id=r["run_id"], ts=r["ts"], event=parse_event(r["kind"], _fields(r["data_json"]))
            )
            for r in rows
        ]


def _run(row: sqlite3.Row) -> RunRecord:
    return RunRecord(
        id=row["id"],
        created=row["created"],
        updated=row["updated"],
        task_path=row["task_path"],
        model_class=row["model_class"],
        task_source=row["task_source"],
        task_sha=row["task_sha"],
        config=json.loads(row["config_json"]),
        status=row["status"],
        message=row["message"],
        best_candidate=row["best_candidate"],
    )


def _candidate(row: sqlite3.Row) -> CandidateRecord:
    return CandidateRecord(
        id=row["id"],
        run_id=row["run_id"],
        parent_id=row["parent_id"],
        seq=row["seq"],
        origin=row["origin"],
        summary=row["summary"],
        instruction=row["instruction"],
        source=row["source"],
        source_sha=row["source_sha"],
        status=row["status"],
        verdict=_verdict(row["verdict_json"]),
        speedup=row["speedup"],
        correct=None if row["correct"] is None else bool(row["correct"]),
        findings=json.loads(row["findings_json"]) if row["findings_json"] else None,
        created=row["created"],
        evaluated=row["evaluated"],
    )


def _fields(text: str) -> Any:
    """A stored event's fields; a row that is not JSON has none (its event still reads, with its defaults)."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return {}


def _verdict(text: str | None) -> Verdict | None:
    """A stored verdict, typed again; a row this version cannot read (a newer format) has none."""
    if not text:
        return None
    try:
        return Verdict.model_validate_json(text)
    except ValidationError:
        return None


def costs_by_round(store: RunStore, run_id: str) -> list[dict[str, Any]]:
    """Model calls, tokens and known dollars per round of a run (round 0: before the first round)."""
    rounds: dict[int, dict[str, Any]] = {}
    current = 0
    for record in store.events(run_id):
        event = record.event
        if isinstance(event, Round):
            current = event.round
        elif isinstance(event, ModelCall):
            row = rounds.setdefault(
                current,
                {
                    "round": current,
                    "calls": 0,
                    "failed": 0,
                    "prompt_tokens": 0,
                    "completion_tokens": 0,
                    "cost_usd": 0.0,
                },
            )
            row["calls"] += 1
            row["failed"] += 0 if event.ok else 1
            row["prompt_tokens"] += event.prompt_tokens
            row["completion_tokens"] += event.completion_tokens
            row["cost_usd"] += event.cost_usd or 0.0
    return [rounds[k] for k in sorted(rounds)]
