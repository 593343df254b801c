"""Apply a verified candidate: the guarded, weight-sharing rewrite of the user's class.

`rewrite_for` computes the new text of a file (the class keeps its name, constructor and
`state_dict` keys; the original forward still runs for inputs outside what was verified);
the editor turns it into one versioned edit after the user accepts, and `forge optimize
--apply` writes it with `apply_to_file`, which first checks that the file is still the text
the run optimized.
"""

from __future__ import annotations

from typing import Any

from ..engine import Task
from ..reintegrate import Rewrite, RewriteError, VerifiedDomain, rewrite_module
from .common import UseCaseError
from .optimize import Answer


def rewrite_for(
    text: str,
    class_name: str,
    source: str,
    domain: VerifiedDomain | dict[str, Any],
    *,
    run_id: str,
    candidate_id: str,
    speedup: float,
) -> Rewrite:
    """The file `text` with `class_name` rewritten to run the candidate `source` where it was verified."""
    verified = domain if isinstance(domain, VerifiedDomain) else VerifiedDomain(**domain)
    try:
        return rewrite_module(
            text, class_name, source, verified, run_id=run_id, candidate_id=candidate_id, speedup=speedup
        )
    except RewriteError as exc:
        raise UseCaseError(f"cannot rewrite {class_name}: {exc}") from exc


def apply_to_file(task: Task, answer: Answer, run_id: str) -> Rewrite:
    """Write the answer into the task's file, in place, unless the file changed since the run."""
    text = task.path.read_text(encoding="utf-8")
    if task.sha and text != task.source:
        raise UseCaseError(f"{task.path} changed during the run; nothing was changed")
    rewrite = rewrite_for(
        text,
        task.model_class,
        answer.candidate.source,
        answer.domain,
        run_id=run_id,
        candidate_id=answer.candidate.id,
        speedup=answer.speedup,
    )
    task.path.write_text(rewrite.new_text, encoding="utf-8")
    return rewrite
