"""The monkeypatch guard (`harness.checks.PatchGuard`) over forge's own classes, in this process.

The worker's evaluation is a chain of classes (`engine/worker/`: `EvaluationBase` -> ... -> `Evaluation`): a candidate
that sets `Evaluation.check` adds a name to the subclass and leaves the base's method as it was. The guard must see
that too, and must not take a submodule imported since (a new name in a module) for a patch.
"""

from __future__ import annotations

import importlib

from forge_lsp.engine.harness.checks import PatchGuard
from forge_lsp.engine.worker import Evaluation
from forge_lsp.engine.worker.base import EvaluationBase


def test_an_inherited_method_set_on_a_subclass_is_a_change():
    guard = PatchGuard()
    assert guard.changes() == []
    assert "check" not in vars(Evaluation) and "check" in vars(EvaluationBase)
    Evaluation.check = lambda self, *a, **k: None  # type: ignore[method-assign]
    try:
        changed = guard.changes()
    finally:
        del Evaluation.check
    assert "forge_lsp.engine.worker.evaluation.Evaluation.check" in changed, changed
    assert guard.changes() == []  # as it was again


def test_a_method_replaced_where_it_is_defined_is_a_change():
    guard = PatchGuard()
    original = EvaluationBase.check
    EvaluationBase.check = lambda self, *a, **k: None  # type: ignore[method-assign]
    try:
        changed = guard.changes()
    finally:
        EvaluationBase.check = original  # type: ignore[method-assign]
    assert "forge_lsp.engine.worker.base.EvaluationBase.check" in changed, changed


def test_a_module_imported_since_is_no_change():
    guard = PatchGuard()
    importlib.import_module("forge_lsp.engine.harness.wire")
    importlib.import_module("forge_lsp.engine.harness.gate")
    assert guard.changes() == []
