"""Evaluation engine: compile, verify and time candidates in isolated worker processes.

Public API (plain data in, plain data out; no editor types):
`load_task`, `load_candidate`, `Evaluator`, `EvalOptions`, `Verdict`, `Status`.
"""

from .candidate import Backend, Candidate, detect_backend, load_candidate
from .evaluate import Evaluator, resolve_device
from .options import EvalOptions, StageTimeouts
from .task import Task, TaskError, load_task
from .verdict import Check, Domain, Mismatch, Narrowing, Status, Timing, TimingStats, Verdict
from .worker_client import EvaluationCancelled, Worker

__all__ = [
    "Backend",
    "Candidate",
    "EvaluationCancelled",
    "Check",
    "Domain",
    "EvalOptions",
    "Evaluator",
    "Mismatch",
    "Narrowing",
    "StageTimeouts",
    "Status",
    "Task",
    "TaskError",
    "Timing",
    "TimingStats",
    "Verdict",
    "Worker",
    "detect_backend",
    "load_candidate",
    "load_task",
    "resolve_device",
]
