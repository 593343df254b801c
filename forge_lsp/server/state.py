"""What the server knows between requests: jobs, results, proposals, diagnostics. Plain data."""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ..agent.progress import speedup_label


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="replace")).hexdigest()


@dataclass
class BackgroundJob:
    id: str
    kind: str  # optimize | profile | explain
    uri: str
    target: str  # class or kernel name
    title: str
    token: str | None = None
    status: str = "queued"  # queued | running | done | failed | cancelled
    message: str = ""
    started: float = field(default_factory=time.time)
    finished: float | None = None
    run_id: str | None = None
    percentage: int = 0
    cancel: Any = None  # callable that stops the job and its workers (`ForgeServer.on_cancel`)
    future: Any = None  # the job thread's Future
    ended: bool = False  # the job's progress end is decided (sent, or waiting for its begin)
    begun: bool = False  # the progress begin was sent (on the event loop)
    end_sent: bool = False  # the progress end was sent (on the event loop): no report after it
    decision: str | None = None  # accepted | rejected | stale: what became of the job's proposal


@dataclass
class Result:
    """The latest measured numbers for a module or kernel, with the content they were measured on."""

    uri: str
    target: str
    kind: str
    doc_sha: str
    when: float
    run_id: str | None = None
    latency_ms: float | None = None  # profile/explain: the module's or kernel's time per call
    measured: str = ""  # how latency_ms was measured (hover says it next to the number)
    reference_ms: float | None = None  # optimize: the reference and the best candidate, timed together
    candidate_ms: float | None = None
    timing: str = ""  # how reference_ms/candidate_ms were timed
    speedup: float | None = None  # optimize: the final re-timing of the best candidate
    search_speedup: float | None = None  # the same candidate as the search measured it
    roofline_pct: float | None = None
    bound: str | None = None
    peaks: str = ""  # the ceilings roofline_pct is placed under: whose, and measured or from the datasheet
    findings: list[dict[str, Any]] = field(default_factory=list)
    stalls: list[str] = field(default_factory=list)
    #: explain: the hottest lines of the document's own text (1-based `line`, `stall_pct`, `stall`)
    hot_lines: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""


@dataclass
class HotClass:
    """A hot module class of the latest hot-spot report, defined in one of the workspace's files."""

    key: str  # the report's class key ("module.QualName")
    name: str
    path: str  # the file that defines it
    line: int  # 0-based line of its class statement when the report was made
    summary: str  # `ModuleClass.summary()`: "18.2% of model time · 2 instances · inputs (8, 77, 768) bf16"
    doc_sha: str  # the file's text the report measured ("": it changed during the run)
    task: Any = None  # Path of the task the run extracted for it, if any
    not_extracted: str | None = None  # why no task was extracted for it, when it was a target


@dataclass
class HotspotView:
    """The latest hot-spot report as the editor shows it: which classes of the workspace's files are hot."""

    report: Any  # usecases.hotspots.HotspotReport
    entry: str  # the entry, as the person would write it (relative to the workspace)
    workspace: Any  # Path: where .forge/ (captures, tasks) is
    when: float  # Unix time of the report
    classes: list[HotClass] = field(default_factory=list)
    job_id: str | None = None  # the job that made it (None: read from .forge/hotspots.json)

    def in_file(self, path: str) -> list[HotClass]:
        return [c for c in self.classes if c.path == path]


@dataclass
class Proposal:
    """A verified faster candidate offered for a module."""

    uri: str
    target: str
    run_id: str
    candidate_id: str
    speedup: float  # final re-timing
    summary: str
    doc_sha: str
    version: int | None
    source: str
    domain: dict[str, Any]
    line: int
    search_speedup: float | None = None  # what the search measured for the same candidate
    job_id: str | None = None  # the job that found it

    @property
    def label(self) -> str:
        return speedup_label(self.speedup, self.search_speedup)


@dataclass
class FileChange:
    """One file of a model-wide offer: its text when the offer was made and with the kept classes rewritten."""

    uri: str
    before: str
    after: str
    classes: list[str]


@dataclass
class ModelWideOffer:
    """The kept replacements of a finished model-wide run, offered as guarded rewrites of the user's classes
    (one edit over every file), then, once accepted, kept for one undo."""

    uri: str  # the entry's document
    function: str
    stamp: str  # the run's folder under .forge/model_wide/
    summary: str  # what the run found end to end
    files: list[FileChange]
    job_id: str | None = None
    accepted: bool = False  # accepted: the lens offers the undo

    @property
    def classes(self) -> list[str]:
        return [c for f in self.files for c in f.classes]


class ServerState:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.jobs: dict[str, BackgroundJob] = {}
        self.results: dict[tuple[str, str, str], Result] = {}
        self.proposals: dict[tuple[str, str], Proposal] = {}
        self.rejected: set[tuple[str, str, str, str]] = set()  # (uri, target, candidate source sha, doc sha)
        self.diagnostics: dict[str, dict[str, list[Any]]] = {}  # uri -> producer -> diagnostics
        self.accepting: dict[str, str] = {}  # uri -> the text an accept in flight is turning it into
        # (uri, target) -> why the last run's answer was not offered: the file changed while it ran
        self.stale_runs: dict[tuple[str, str], str] = {}
        self.hotspots: HotspotView | None = None  # the latest hot-spot report, for lenses and hover
        self.model_wide: dict[tuple[str, str], ModelWideOffer] = {}  # (entry uri, function) -> its offer or undo

    def result_for(self, uri: str, target: str) -> list[Result]:
        with self.lock:
            return [r for (u, t, _), r in self.results.items() if u == uri and t == target]
