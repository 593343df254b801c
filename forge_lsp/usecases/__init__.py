"""The use cases: what a person asks forge to do, written once for every front end.

`forge_lsp.cli` (commands) and `forge_lsp.server` (editor jobs) are thin adapters over these:
they parse their inputs, call one use case, and render its typed result (rich text, LSP types).
No rule of the product lives in an adapter: which candidate is offered, how an explanation is
built, how a candidate is written back, where a run is kept.

- `optimize`: search for a faster verified implementation of a module (`ModuleOptimization`).
- `explain`: profile a module, candidate or `.cu` kernel, place it on the roofline, find its
  bottlenecks (`profile_target`, `explain`, and the Judge's feedback `judge_feedback`).
- `apply`: write a verified candidate back into the user's class (`rewrite_for`, `apply_to_file`).
- `runs`: the run store read for people (`list_runs`, `run_details`).
- `hotspots`: where a whole model spends its time, and tasks of its hot classes' captured inputs
  (`find_model_hotspots`).
"""

from .common import UseCaseError, find_workspace

__all__ = ["UseCaseError", "find_workspace", "preload"]


def preload() -> None:
    """Import what the use cases import when they first run (the model SDK, the agent, the engine's front
    door), for a long-lived front end that wants that done up front (the language server freezes its heap
    after it). Nothing here imports torch."""
    from ..agent import events, provider, store  # noqa: F401
    from . import apply, explain, optimize, runs  # noqa: F401
