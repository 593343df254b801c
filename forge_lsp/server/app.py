"""The language server's composition root: the server and its features, put together. `server.py` is the server
alone and knows no feature; each feature module (`features/`) exposes one `Feature` (``FEATURE``) that registers its
own handlers and commands. Here every feature is registered, opened with the workspace and closed with the session,
and asked for its code lenses and code actions: the handlers of `textDocument/codeLens` and `textDocument/codeAction`
know no feature."""

from __future__ import annotations

from collections.abc import Sequence

from lsprotocol import types as t

from .feature import Feature
from .features import accept, documents, hotspots, hover, inputs, jobs, lifecycle, model_wide, report, targets
from .server import ForgeServer

#: The features, in the order they register, and in which the editor sees their lenses on a line and their code
#: actions on a range (a hot class's share before its proposal, its proposal before Optimize, Profile, Explain).
FEATURES: tuple[Feature, ...] = (
    lifecycle.FEATURE,
    documents.FEATURE,
    hotspots.FEATURE,
    model_wide.FEATURE,
    accept.FEATURE,
    inputs.FEATURE,
    targets.FEATURE,
    jobs.FEATURE,
    hover.FEATURE,
    report.FEATURE,
)

#: the kinds of forge's code actions (the server's `codeActionProvider`)
CODE_ACTION_KINDS = [t.CodeActionKind.QuickFix, t.CodeActionKind.Refactor]


def create_server(features: Sequence[Feature] = FEATURES) -> ForgeServer:
    ls = ForgeServer()
    for feature in features:
        feature.register(ls)
        ls.on_workspace_open.append(feature.workspace_opened)
        ls.on_session_end.append(feature.close)
    _serve_lenses_and_actions(ls, tuple(features))
    return ls


def _serve_lenses_and_actions(ls: ForgeServer, features: tuple[Feature, ...]) -> None:
    @ls.feature(t.TEXT_DOCUMENT_CODE_LENS)
    def code_lens(ls: ForgeServer, params: t.CodeLensParams) -> list[t.CodeLens]:
        """Every feature's lenses, in line order; on one line, in the features' order."""
        lenses = [x for f in features for x in f.code_lenses(ls, params.text_document.uri)]
        return sorted(lenses, key=lambda x: x.range.start.line)

    @ls.feature(
        t.TEXT_DOCUMENT_CODE_ACTION,
        t.CodeActionOptions(
            code_action_kinds=CODE_ACTION_KINDS, resolve_provider=t.CODE_ACTION_RESOLVE in ls.protocol.fm.features
        ),
    )
    def code_action(ls: ForgeServer, params: t.CodeActionParams) -> list[t.CodeAction]:
        return [a for f in features for a in f.code_actions(ls, params)]
