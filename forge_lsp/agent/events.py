"""Run events: one in-process stream that the CLI, the language server and reports all consume.

A run publishes typed events (`run_events`: candidate queued, compiled, verified, timed, new best,
model call, round, done) as things happen. `EventBus.publish` stores each event in the run store
first and then calls every subscriber with its `EventRecord` (subscribers must be quick and must not
raise; a failing subscriber is dropped from that delivery, never the run). Consumers that start late
replay the stored events with `RunStore.events(run_id, after=...)`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from .run_events import TRANSIENT_KINDS, RunEvent
from .store import EventRecord, RunStore

log = logging.getLogger(__name__)

Subscriber = Callable[[EventRecord], None]


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

    def publish(self, run_id: str, event: RunEvent) -> EventRecord:
        ts = time.time()
        seq = self.store.add_event(run_id, event, ts) if self.store and event.kind not in TRANSIENT_KINDS else 0
        record = EventRecord(id=seq, run_id=run_id, ts=ts, event=event)
        with self._lock:
            subscribers = list(self._subscribers)
        for fn in subscribers:
            try:
                fn(record)
            except Exception:  # noqa: BLE001 - a broken consumer never stops a run
                log.exception("event subscriber %r failed on %s", fn, event.kind)
        return record
