"""Code lenses, code actions and the `forge.*` commands (optimize, profile, explain, cancel, accept, reject). The
hot-spot lenses and commands are in `hotspots`."""

from __future__ import annotations

from typing import Any

from lsprotocol import types as t

from ..protocol import CancelResult, CandidateArgs, InsertInputsResult, ProtocolError, TargetArgs, positional, wire
from ..server import ForgeServer
from . import accept, hotspots, jobs, model_wide


def _lens(line: int, title: str, command: str, args: list[Any]) -> t.CodeLens:
    rng = t.Range(start=t.Position(line=line, character=0), end=t.Position(line=line, character=0))
    return t.CodeLens(range=rng, command=t.Command(title=title, command=command, arguments=args))


def register(ls: ForgeServer) -> None:
    @ls.feature(t.TEXT_DOCUMENT_CODE_LENS)
    def code_lens(ls: ForgeServer, params: t.CodeLensParams) -> list[t.CodeLens]:
        uri = params.text_document.uri
        lenses = hotspots.lenses(ls, uri)  # Find hot spots on entry functions; a hot class's share, first
        lenses += model_wide.lenses(ls, uri)  # and on the entry functions, the model-wide run, its offer or undo
        entry = _file_entry(ls, uri)
        if entry is None:
            return lenses
        for m in entry.modules:
            prop = ls.state.proposals.get((uri, m.name))
            if prop is None and (uri, m.name) in ls.state.stale_runs:
                # the last run ended on an edited file: nothing to accept, say why and offer the re-run
                lenses.append(
                    _lens(m.line, "forge: re-run — the file changed during the run", "forge.optimize", [uri, m.name])
                )
            if prop is not None:
                args = [uri, m.name, prop.run_id, prop.candidate_id]
                lenses += [
                    _lens(m.line, f"forge: {prop.label} faster candidate — Show diff", "forge.showDiff", args),
                    _lens(m.line, "Accept", "forge.accept", args),
                    _lens(m.line, "Reject", "forge.reject", args),
                ]
            lenses += [
                _lens(m.line, f"Optimize {m.name}", "forge.optimize", [uri, m.name]),
                _lens(m.line, "Profile", "forge.profile", [uri, m.name]),
                _lens(m.line, "Explain bottleneck", "forge.explain", [uri, m.name]),
            ]
        for k in entry.kernels:
            lenses += [
                _lens(k.line, "Explain NCU bottleneck", "forge.explain", [uri, k.name]),
                _lens(k.line, "Profile kernel", "forge.profile", [uri, k.name]),
            ]
        return lenses

    @ls.feature(t.CODE_ACTION_RESOLVE)
    def resolve(ls: ForgeServer, action: t.CodeAction) -> t.CodeAction:
        """The inputs quick fix's edit, computed only when the user picks it."""
        data = action.data if isinstance(action.data, dict) else {}
        if data.get("kind") == "insertInputs":
            fix = _inputs_fix(ls, data["uri"], data["name"])
            if fix is not None:
                action.edit = fix.edit
        return action

    @ls.feature(
        t.TEXT_DOCUMENT_CODE_ACTION,
        t.CodeActionOptions(
            code_action_kinds=[t.CodeActionKind.QuickFix, t.CodeActionKind.Refactor], resolve_provider=True
        ),
    )
    def code_action(ls: ForgeServer, params: t.CodeActionParams) -> list[t.CodeAction]:
        uri = params.text_document.uri
        entry = _file_entry(ls, uri)
        if entry is None:
            return []
        line = params.range.start.line
        actions: list[t.CodeAction] = []
        module = next((m for m in entry.modules if m.line <= line <= m.end_line), None)
        if module is not None:
            name = module.name
            prop = ls.state.proposals.get((uri, name))
            if prop is not None:
                args = [uri, name, prop.run_id, prop.candidate_id]
                actions += [
                    _action(f"Accept forge's {prop.label} candidate for {name}", "forge.accept", args),
                    _action("Reject forge's candidate", "forge.reject", args),
                    _action("Show forge's candidate diff", "forge.showDiff", args),
                ]
            if module.inputs is None and not (entry.has_get_inputs and entry.has_get_init_inputs):
                if _resolves_edits(ls):  # the skeleton is built on resolve: code actions stay cheap
                    actions.append(
                        t.CodeAction(
                            title=f"Add get_inputs()/get_init_inputs() for {name}",
                            kind=t.CodeActionKind.QuickFix,
                            data={"kind": "insertInputs", "uri": uri, "name": name},
                        )
                    )
                else:
                    fix = _inputs_fix(ls, uri, name)
                    if fix is not None:
                        actions.append(fix)
            actions += [
                _action(f"Optimize `{name}`", "forge.optimize", [uri, name]),
                _action(f"Profile `{name}`", "forge.profile", [uri, name]),
                _action(f"Explain bottleneck of `{name}`", "forge.explain", [uri, name]),
            ]
        kernel = next((k for k in entry.kernels if k.line == line), None) if module is None else None
        if kernel is not None:
            actions += [
                _action("Explain NCU bottleneck", "forge.explain", [uri, kernel.name]),
                _action(f"Profile kernel `{kernel.name}`", "forge.profile", [uri, kernel.name]),
            ]
        return actions

    @ls.command("forge.optimize")
    def optimize(ls: ForgeServer, *args: Any) -> dict[str, Any]:
        a = positional(TargetArgs, args)
        return wire(jobs.start(ls, "optimize", a.uri, a.name))

    @ls.command("forge.profile")
    def profile(ls: ForgeServer, *args: Any) -> dict[str, Any]:
        a = positional(TargetArgs, args)
        return wire(jobs.start(ls, "profile", a.uri, a.name))

    @ls.command("forge.explain")
    def explain(ls: ForgeServer, *args: Any) -> dict[str, Any]:
        a = positional(TargetArgs, args)
        return wire(jobs.start(ls, "explain", a.uri, a.name))

    @ls.command("forge.cancel")
    def cancel(ls: ForgeServer, *args: Any) -> dict[str, Any]:
        """``[]``: every job; ``[jobId]``: that one."""
        values = list(args[0]) if len(args) == 1 and isinstance(args[0], list) else list(args)
        job_id = values[0] if values else None  # null too: a client's `undefined`
        if len(values) > 1 or not (job_id is None or isinstance(job_id, str)):
            raise ProtocolError("expected no argument (every job) or one job id (a string)")
        return wire(CancelResult(cancelled=ls.cancel_job(job_id)))

    @ls.command("forge.accept")
    async def accept_(ls: ForgeServer, *args: Any) -> dict[str, Any]:
        return wire(await accept.accept(ls, positional(CandidateArgs, args)))

    @ls.command("forge.reject")
    def reject_(ls: ForgeServer, *args: Any) -> dict[str, Any]:
        return wire(accept.reject(ls, positional(CandidateArgs, args)))

    @ls.command("forge.showDiff")
    async def show_diff(ls: ForgeServer, *args: Any) -> dict[str, Any]:
        return wire(await accept.show_diff(ls, positional(CandidateArgs, args)))

    @ls.command("forge.insertInputs")
    async def insert_inputs(ls: ForgeServer, *args: Any) -> dict[str, Any]:
        a = positional(TargetArgs, args)
        fix = _inputs_fix(ls, a.uri, a.name)
        if fix is None or fix.edit is None:
            return wire(InsertInputsResult(applied=False, message="nothing to insert"))
        result = await ls.workspace_apply_edit_async(t.ApplyWorkspaceEditParams(edit=fix.edit, label=fix.title))
        return wire(InsertInputsResult(applied=bool(result.applied)))


def _resolves_edits(ls: ForgeServer) -> bool:
    caps = ls.client_capabilities.text_document
    ca = caps.code_action if caps else None
    return bool(ca and ca.resolve_support and "edit" in (ca.resolve_support.properties or []))


def _action(title: str, command: str, args: list[Any]) -> t.CodeAction:
    return t.CodeAction(
        title=title, kind=t.CodeActionKind.Refactor, command=t.Command(title=title, command=command, arguments=args)
    )


def _file_entry(ls: ForgeServer, uri: str):
    if ls.index is None:
        return None
    path = ls.path_of(uri)
    return ls.index.get(path) if path else None


def _inputs_fix(ls: ForgeServer, uri: str, name: str) -> t.CodeAction | None:
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
