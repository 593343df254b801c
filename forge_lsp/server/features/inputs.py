"""The example-inputs quick fix: on a module forge cannot run for want of inputs, "Add get_inputs()/get_init_inputs()"
inserts their skeleton (`workspace.skeleton`) as a versioned edit; built on `codeAction/resolve` when the client
resolves edits, so that code actions stay cheap. `forge.insertInputs` applies the same edit."""

from __future__ import annotations

from typing import Any

from lsprotocol import types as t

from ..feature import Unit, file_entry, module_at
from ..protocol import InsertInputsResult, TargetArgs, positional, wire
from ..server import ForgeServer


def register(ls: ForgeServer) -> None:
    @ls.feature(t.CODE_ACTION_RESOLVE)
    def resolve(ls: ForgeServer, action: t.CodeAction) -> t.CodeAction:
        """The inputs quick fix's edit, computed only when the user picks it."""
        data = action.data if isinstance(action.data, dict) else {}
        if data.get("kind") == "insertInputs":
            fix = inputs_fix(ls, data["uri"], data["name"])
            if fix is not None:
                action.edit = fix.edit
        return action

    @ls.command("forge.insertInputs")
    async def insert_inputs(ls: ForgeServer, *args: Any) -> dict[str, Any]:
        a = positional(TargetArgs, args)
        fix = inputs_fix(ls, a.uri, a.name)
        if fix is None or fix.edit is None:
            return wire(InsertInputsResult(applied=False, message="nothing to insert"))
        result = await ls.workspace_apply_edit_async(t.ApplyWorkspaceEditParams(edit=fix.edit, label=fix.title))
        return wire(InsertInputsResult(applied=bool(result.applied)))


def code_actions(ls: ForgeServer, params: t.CodeActionParams) -> list[t.CodeAction]:
    uri = params.text_document.uri
    entry = file_entry(ls, uri)
    module = module_at(entry, params.range.start.line) if entry is not None else None
    if entry is None or module is None or module.inputs is not None:
        return []
    if entry.has_get_inputs and entry.has_get_init_inputs:
        return []
    name = module.name
    if _resolves_edits(ls):  # the skeleton is built on resolve: code actions stay cheap
        return [
            t.CodeAction(
                title=f"Add get_inputs()/get_init_inputs() for {name}",
                kind=t.CodeActionKind.QuickFix,
                data={"kind": "insertInputs", "uri": uri, "name": name},
            )
        ]
    fix = inputs_fix(ls, uri, name)
    return [fix] if fix is not None else []


def _resolves_edits(ls: ForgeServer) -> bool:
    caps = ls.client_capabilities.text_document
    ca = caps.code_action if caps else None
    return bool(ca and ca.resolve_support and "edit" in (ca.resolve_support.properties or []))


def inputs_fix(ls: ForgeServer, uri: str, name: str) -> t.CodeAction | None:
    """The quick fix with its edit: the skeleton inserted where it goes, for the document's version."""
    from ...workspace.skeleton import inputs_skeleton

    text = ls.doc_text(uri)
    if text is None:
        return None
    try:
        line, snippet = inputs_skeleton(text, name)
    except Exception:  # noqa: BLE001 - no skeleton for this module: no quick fix
        return None
    if not snippet:  # the file already has both functions
        return None
    pos = t.Position(line=line, character=0)
    edit = t.TextDocumentEdit(
        text_document=t.OptionalVersionedTextDocumentIdentifier(uri=uri, version=ls.doc_version(uri)),
        edits=[t.TextEdit(range=t.Range(start=pos, end=pos), new_text=snippet)],
    )
    return t.CodeAction(
        title=f"Add get_inputs()/get_init_inputs() for {name}",
        kind=t.CodeActionKind.QuickFix,
        edit=t.WorkspaceEdit(document_changes=[edit]),
    )


FEATURE = Unit("inputs", register, code_actions=code_actions)
