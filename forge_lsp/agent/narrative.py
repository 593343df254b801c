"""The optional LLM narrative on top of the profiler's rule-based explanation (Judge prompt).

The findings stand on their own; when a model is configured, the Judge reads them (not raw
metric dumps) and writes a short narrative for a person. Any model failure leaves the
explanation as it was and says why.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ..profiler.model import Explanation
from .roles import Prompts


class Narrative(BaseModel):
    summary: str
    bottleneck: str
    next_steps: list[str]


def narrative_messages(prompts: Prompts, explanation: Explanation, source: str | None = None) -> list[dict[str, str]]:
    ctx: dict[str, Any] = {
        "mode": "explain",
        "model_class": "Model",
        "vary": [],
        "kernel": explanation.kernel,
        "peaks": explanation.peaks,
        "roofline": explanation.roofline,
        "findings": explanation.findings[:6],
        "source": source,
    }
    return [
        {"role": "system", "content": prompts.render("judge_system.j2", **ctx)},
        {"role": "user", "content": prompts.render("judge_explain.j2", **ctx)},
    ]


def narrate(
    model: Any, explanation: Explanation, *, prompts: Prompts | None = None, source: str | None = None
) -> tuple[str | None, str]:
    """(narrative text or None, note): ask the Judge model to explain; never raises for model errors."""
    from .provider import ProviderError

    try:
        result = model.complete(narrative_messages(prompts or Prompts(), explanation, source), Narrative)
    except ProviderError as exc:
        return None, f"no narrative: {exc}"
    n = result.parsed
    steps = "\n".join(f"{i}. {s}" for i, s in enumerate(n.next_steps, 1))
    return f"{n.summary}\nBottleneck: {n.bottleneck}\n{steps}".strip(), f"narrative by {result.model}"
