"""Run events: one in-process stream that the CLI, the language server and reports all consume.

A run publishes `RunEvent`s as things happen (candidate queued, compiled, verified, timed, new
best, model call, round, done). `EventBus.publish` stores each event in the run store first and
then calls every subscriber (subscribers must be quick and must not raise; a failing subscriber
is dropped from that delivery, never the run). Consumers that start late replay the stored
events with `RunStore.events(run_id, after=...)`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from .store import RunStore

log = logging.getLogger(__name__)

#: Event kinds, in the order a candidate sees them.
KINDS = (
    "run_started",
    "round",
    "model_call",
    "candidate_queued",
    "candidate_compiled",
    "candidate_verified",
    "candidate_timed",
    "candidate_failed",
    "new_best",
    "profiled",
    "budget",
    "final_retime",
    "run_finished",
)

#: Kinds that are not stored: moment-to-moment state that only a live consumer needs (a model call that
#: has been waiting N s, how much of its reply arrived). Replays do not see them.
TRANSIENT_KINDS = frozenset({"model_waiting"})


class RunEvent(BaseModel):
    run_id: str
    kind: str
    ts: float
    data: dict[str, Any] = {}
    seq: int = 0


Subscriber = Callable[[RunEvent], None]


class EventBus:
    def __init__(self, store: RunStore | None = None):
        self.store = store
        self._subscribers: list[Subscriber] = []
        self._lock = threading.Lock()

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        """Add a subscriber; returns a function that removes it."""
        with self._lock:
            self._subscribers.append(fn)

        def unsubscribe() -> None:
            with self._lock:
                if fn in self._subscribers:
                    self._subscribers.remove(fn)

        return unsubscribe

    def publish(self, run_id: str, kind: str, **data: Any) -> RunEvent:
        ts = time.time()
        seq = self.store.add_event(run_id, kind, data, ts) if self.store and kind not in TRANSIENT_KINDS else 0
        event = RunEvent(run_id=run_id, kind=kind, ts=ts, data=data, seq=seq)
        with self._lock:
            subscribers = list(self._subscribers)
        for fn in subscribers:
            try:
                fn(event)
            except Exception:  # noqa: BLE001 - a broken consumer never stops a run
                log.exception("event subscriber %r failed on %s", fn, kind)
        return event
