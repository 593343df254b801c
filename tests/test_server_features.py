"""The server's features as units (`forge_lsp/server/feature.py`, `server/app.py`): each feature in `FEATURES` is a
`Feature`, every command the server advertises is registered by exactly one of them, and the lenses and code actions
the composition root gathers from them are, title for title, command for command, what the editor has always been
shown. In-process, no client and no child process."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as t
from pygls.workspace import Workspace

from forge_lsp.server import protocol
from forge_lsp.server.app import FEATURES, create_server
from forge_lsp.server.feature import Feature
from forge_lsp.server.server import ForgeServer
from forge_lsp.server.state import FileChange, HotClass, HotspotView, ModelWideOffer, Proposal, text_sha

MODELS = """import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 2


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        return self.block(x)


class Other(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x + 1


def get_inputs():
    return [torch.randn(4)]


def get_init_inputs():
    return []


def build():
    return Model(), (torch.randn(4),)


def build_small():
    return Model(), (torch.randn(2),)
"""

NO_INPUTS = """import torch.nn as nn


class Lonely(nn.Module):
    def forward(self, x):
        return x
"""

KERNELS = """__global__ void scale(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= 2; }

__global__ void shift(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] += 1; }
"""


def _line(text: str, start: str) -> int:
    return next(i for i, line in enumerate(text.splitlines()) if line.startswith(start))


@pytest.fixture
def served(tmp_path: Path):
    """A server as `initialized` leaves it, on a workspace with a proposal, a stale run, a hot-spot report and two
    model-wide offers (one accepted), a module without inputs and a CUDA file."""
    from forge_lsp.workspace.index import WorkspaceIndex

    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "lonely.py").write_text(NO_INPUTS)
    (tmp_path / "kernels.cu").write_text(KERNELS)
    ls = create_server()
    ls.root = tmp_path
    ls.protocol._workspace = Workspace(tmp_path.as_uri())
    ls.protocol.client_capabilities = t.ClientCapabilities()  # as `initialize` leaves it, for a bare client
    ls.index = WorkspaceIndex(tmp_path)
    ls.index.scan()
    uri = (tmp_path / "models.py").as_uri()
    sha = text_sha(MODELS)
    ls.state.proposals[(uri, "Model")] = Proposal(
        uri=uri,
        target="Model",
        run_id="r1",
        candidate_id="r1/c2",
        speedup=2.0,
        summary="fused",
        doc_sha=sha,
        version=None,
        source="",
        domain={},
        line=_line(MODELS, "class Model"),
    )
    ls.state.stale_runs[(uri, "Other")] = "changed while it ran"
    path = os.path.realpath(tmp_path / "models.py")
    ls.state.hotspots = HotspotView(
        report=None,
        entry="models.py:build",
        workspace=tmp_path,
        when=0.0,
        classes=[
            HotClass(
                key="models.Block",
                name="Block",
                path=path,
                line=_line(MODELS, "class Block"),
                summary="60.0% of model time",
                doc_sha=sha,
                task=tmp_path / "task.py",
            )
        ],
    )
    change = FileChange(uri=uri, before=MODELS, after=MODELS, classes=["Block"])
    ls.state.model_wide[(uri, "build")] = ModelWideOffer(
        uri=uri, function="build", stamp="s1", summary="1.50× end to end", files=[change]
    )
    ls.state.model_wide[(uri, "build_small")] = ModelWideOffer(
        uri=uri, function="build_small", stamp="s2", summary="1.20× end to end", files=[change], accepted=True
    )
    return ls, tmp_path


def _handler(ls: ForgeServer, method: str):
    """The registered handler, the server already bound (as pygls calls it)."""
    return ls.protocol.fm.features[method]


def _lenses(ls: ForgeServer, uri: str) -> list[tuple[int, str, str, list[Any]]]:
    found = _handler(ls, t.TEXT_DOCUMENT_CODE_LENS)(t.CodeLensParams(text_document=t.TextDocumentIdentifier(uri=uri)))
    return [(x.range.start.line, x.command.title, x.command.command, list(x.command.arguments or [])) for x in found]


def _actions(ls: ForgeServer, uri: str, line: int) -> list[tuple[str, str | None, list[Any]]]:
    pos = t.Position(line=line, character=0)
    found = _handler(ls, t.TEXT_DOCUMENT_CODE_ACTION)(
        t.CodeActionParams(
            text_document=t.TextDocumentIdentifier(uri=uri),
            range=t.Range(start=pos, end=pos),
            context=t.CodeActionContext(diagnostics=[]),
        ),
    )
    return [
        (a.title, a.command.command if a.command else None, list(a.command.arguments or []) if a.command else [])
        for a in found
    ]


def test_every_feature_is_a_feature_and_each_command_has_one_owner():
    assert FEATURES and all(isinstance(f, Feature) for f in FEATURES), [
        f for f in FEATURES if not isinstance(f, Feature)
    ]
    assert len({f.name for f in FEATURES}) == len(FEATURES)
    owners: dict[str, list[str]] = {}
    for feature in FEATURES:
        ls = ForgeServer()  # each feature alone on a bare server: what it registers is its own
        feature.register(ls)
        for command in ls.protocol.fm.commands:
            owners.setdefault(command, []).append(feature.name)
    advertised = create_server().protocol.fm.commands
    assert set(advertised) == set(protocol.COMMANDS)
    assert {c: o for c, o in owners.items() if len(o) != 1} == {}
    assert set(owners) == set(advertised)


def test_each_command_is_registered_by_the_feature_that_answers_it():
    """Not one module registering the others' commands: each sits with the code that answers it and the lenses and
    code actions that show it."""
    by_name = {f.name: f for f in FEATURES}
    expected = {
        "targets": {"forge.optimize", "forge.profile", "forge.explain"},
        "jobs": {"forge.cancel"},
        "accept": {"forge.accept", "forge.reject", "forge.showDiff"},
        "inputs": {"forge.insertInputs"},
        "hotspots": {"forge.hotspots", "forge.optimizeCaptured"},
        "model_wide": {
            "forge.optimizeModelWide",
            "forge.acceptModelWide",
            "forge.rejectModelWide",
            "forge.undoModelWide",
        },
        "report": {"forge.openReport"},
    }
    for name, commands in expected.items():
        ls = ForgeServer()
        by_name[name].register(ls)
        assert set(ls.protocol.fm.commands) == commands, name


def test_a_feature_is_any_object_of_that_shape_and_a_unit_needs_only_a_name_and_register():
    """`Unit` answers what a feature does not do (no lenses, no actions, nothing to open or close); any object with
    the protocol's members is a feature too."""
    from forge_lsp.server.feature import Unit

    class Plain:
        name = "plain"

        def register(self, ls: ForgeServer) -> None:
            pass

        def code_lenses(self, ls: ForgeServer, uri: str) -> list[t.CodeLens]:
            return []

        def code_actions(self, ls: ForgeServer, params: t.CodeActionParams) -> list[t.CodeAction]:
            return []

        def workspace_opened(self, ls: ForgeServer) -> None:
            pass

        def close(self, ls: ForgeServer) -> None:
            pass

    quiet = Unit("quiet", lambda ls: None)
    assert isinstance(quiet, Feature) and isinstance(Plain(), Feature)
    assert not isinstance(object(), Feature)
    ls = create_server(features=(quiet, Plain()))
    assert _lenses(ls, "file:///nowhere.py") == [] and ls.protocol.fm.commands == {}


def test_each_feature_is_opened_and_closed_once_in_order_even_when_one_fails(monkeypatch):
    from forge_lsp import sandbox
    from forge_lsp.server.feature import Unit

    seen: list[str] = []

    def fail(ls: ForgeServer) -> None:
        seen.append("a closed")
        raise RuntimeError("cannot close")

    a = Unit("a", lambda ls: None, workspace_opened=lambda ls: seen.append("a opened"), close=fail)
    b = Unit("b", lambda ls: None, close=lambda ls: seen.append("b closed"))
    monkeypatch.setattr(sandbox, "kill_all", lambda wait=0.5: 0)
    ls = create_server(features=(a, b))
    for opened in ls.on_workspace_open:  # as the lifecycle feature does at `initialized`
        opened(ls)
    ls.end_session(wait=0)
    assert seen == ["a opened", "a closed", "b closed"]


def test_lenses_are_those_the_editor_always_had_in_their_order(served):
    """The lenses as one module put them together before each feature gave its own: the same, in line order, and
    on each line in the same order (VS Code and Neovim show a line's lenses in the order they come)."""
    ls, root = served
    uri = (root / "models.py").as_uri()
    build, small = _line(MODELS, "def build()"), _line(MODELS, "def build_small")
    block, model, other = _line(MODELS, "class Block"), _line(MODELS, "class Model"), _line(MODELS, "class Other")
    args = [uri, "Model", "r1", "r1/c2"]
    before = [
        (build, "forge: Find hot spots", "forge.hotspots", [uri, "build"]),
        (small, "forge: Find hot spots", "forge.hotspots", [uri, "build_small"]),
        (block, "forge: 60.0% of model time", "", []),
        (block, "Optimize (captured inputs)", "forge.optimizeCaptured", [uri, "Block"]),
        (build, "forge: model-wide 1.50× end to end — Accept into Block", "forge.acceptModelWide", [uri, "build"]),
        (build, "Reject", "forge.rejectModelWide", [uri, "build"]),
        (build, "forge: Optimize model-wide", "forge.optimizeModelWide", [uri, "build"]),
        (small, "forge: Undo model-wide accept (Block)", "forge.undoModelWide", [uri, "build_small"]),
        (small, "forge: Optimize model-wide", "forge.optimizeModelWide", [uri, "build_small"]),
        (block, "Optimize Block", "forge.optimize", [uri, "Block"]),
        (block, "Profile", "forge.profile", [uri, "Block"]),
        (block, "Explain bottleneck", "forge.explain", [uri, "Block"]),
        (model, "forge: 2.00× (final re-timing) faster candidate — Show diff", "forge.showDiff", args),
        (model, "Accept", "forge.accept", args),
        (model, "Reject", "forge.reject", args),
        (model, "Optimize Model", "forge.optimize", [uri, "Model"]),
        (model, "Profile", "forge.profile", [uri, "Model"]),
        (model, "Explain bottleneck", "forge.explain", [uri, "Model"]),
        (other, "forge: re-run — the file changed during the run", "forge.optimize", [uri, "Other"]),
        (other, "Optimize Other", "forge.optimize", [uri, "Other"]),
        (other, "Profile", "forge.profile", [uri, "Other"]),
        (other, "Explain bottleneck", "forge.explain", [uri, "Other"]),
    ]
    assert _lenses(ls, uri) == sorted(before, key=lambda x: x[0])
    cu = (root / "kernels.cu").as_uri()
    assert _lenses(ls, cu) == [
        (0, "Explain NCU bottleneck", "forge.explain", [cu, "scale"]),
        (0, "Profile kernel", "forge.profile", [cu, "scale"]),
        (2, "Explain NCU bottleneck", "forge.explain", [cu, "shift"]),
        (2, "Profile kernel", "forge.profile", [cu, "shift"]),
    ]


def test_code_actions_are_those_the_editor_always_had_in_their_order(served):
    ls, root = served
    uri = (root / "models.py").as_uri()
    args = [uri, "Model", "r1", "r1/c2"]
    assert _actions(ls, uri, _line(MODELS, "class Model") + 2) == [
        ("Accept forge's 2.00× (final re-timing) candidate for Model", "forge.accept", args),
        ("Reject forge's candidate", "forge.reject", args),
        ("Show forge's candidate diff", "forge.showDiff", args),
        ("Optimize `Model`", "forge.optimize", [uri, "Model"]),
        ("Profile `Model`", "forge.profile", [uri, "Model"]),
        ("Explain bottleneck of `Model`", "forge.explain", [uri, "Model"]),
    ]
    assert _actions(ls, uri, _line(MODELS, "def build()")) == []
    lonely = (root / "lonely.py").as_uri()
    found = _actions(ls, lonely, _line(NO_INPUTS, "class Lonely"))
    assert found == [
        ("Add get_inputs()/get_init_inputs() for Lonely", None, []),  # the edit itself, without resolve support
        ("Optimize `Lonely`", "forge.optimize", [lonely, "Lonely"]),
        ("Profile `Lonely`", "forge.profile", [lonely, "Lonely"]),
        ("Explain bottleneck of `Lonely`", "forge.explain", [lonely, "Lonely"]),
    ]
    cu = (root / "kernels.cu").as_uri()
    assert _actions(ls, cu, 2) == [
        ("Explain NCU bottleneck", "forge.explain", [cu, "shift"]),
        ("Profile kernel `shift`", "forge.profile", [cu, "shift"]),
    ]


def test_the_inputs_quick_fix_is_resolved_for_a_client_that_resolves_edits(served):
    ls, root = served
    ls.protocol.client_capabilities = t.ClientCapabilities(
        text_document=t.TextDocumentClientCapabilities(
            code_action=t.CodeActionClientCapabilities(
                resolve_support=t.ClientCodeActionResolveOptions(properties=["edit"])
            )
        )
    )
    assert ls.protocol.fm.feature_options[t.TEXT_DOCUMENT_CODE_ACTION].resolve_provider
    lonely = (root / "lonely.py").as_uri()
    pos = t.Position(line=_line(NO_INPUTS, "class Lonely"), character=0)
    found = _handler(ls, t.TEXT_DOCUMENT_CODE_ACTION)(
        t.CodeActionParams(
            text_document=t.TextDocumentIdentifier(uri=lonely),
            range=t.Range(start=pos, end=pos),
            context=t.CodeActionContext(diagnostics=[]),
        )
    )
    fix = found[0]
    assert fix.kind == t.CodeActionKind.QuickFix and fix.edit is None and fix.data["kind"] == "insertInputs"
    resolved = _handler(ls, t.CODE_ACTION_RESOLVE)(fix)
    (change,) = resolved.edit.document_changes
    assert change.text_document.uri == lonely and "def get_inputs" in change.edits[0].new_text
