"""Accept, reject and show a proposed candidate: the lenses and code actions on a class with an open proposal, and
their commands (`forge.accept`, `forge.reject`, `forge.showDiff`). Accept sends one versioned edit and confirms it
from the text."""

from __future__ import annotations

import asyncio
import difflib
import logging
import re
from pathlib import Path
from typing import Any

from lsprotocol import types as t

from ...agent.run_events import Decision, DecisionKind
from ..feature import Unit, command_action, file_entry, lens, module_at
from ..protocol import AcceptResult, CandidateArgs, DiffResult, RejectResult, positional, wire
from ..server import ForgeServer
from ..state import Proposal, text_sha

CONFIRM_S = 5.0
log = logging.getLogger("forge_lsp.server")


def register(ls: ForgeServer) -> None:
    @ls.command("forge.accept")
    async def accept_(ls: ForgeServer, *args: Any) -> dict[str, Any]:
        return wire(await accept(ls, positional(CandidateArgs, args)))

    @ls.command("forge.reject")
    def reject_(ls: ForgeServer, *args: Any) -> dict[str, Any]:
        return wire(reject(ls, positional(CandidateArgs, args)))

    @ls.command("forge.showDiff")
    async def show_diff_(ls: ForgeServer, *args: Any) -> dict[str, Any]:
        return wire(await show_diff(ls, positional(CandidateArgs, args)))


def code_lenses(ls: ForgeServer, uri: str) -> list[t.CodeLens]:
    """On each class with an open proposal: its speedup and Show diff, Accept, Reject."""
    entry = file_entry(ls, uri)
    lenses: list[t.CodeLens] = []
    for m in entry.modules if entry is not None else []:
        prop = ls.state.proposals.get((uri, m.name))
        if prop is not None:
            args = [uri, m.name, prop.run_id, prop.candidate_id]
            lenses += [
                lens(m.line, f"forge: {prop.label} faster candidate — Show diff", "forge.showDiff", args),
                lens(m.line, "Accept", "forge.accept", args),
                lens(m.line, "Reject", "forge.reject", args),
            ]
    return lenses


def code_actions(ls: ForgeServer, params: t.CodeActionParams) -> list[t.CodeAction]:
    uri = params.text_document.uri
    entry = file_entry(ls, uri)
    module = module_at(entry, params.range.start.line) if entry is not None else None
    prop = ls.state.proposals.get((uri, module.name)) if module is not None else None
    if module is None or prop is None:
        return []
    args = [uri, module.name, prop.run_id, prop.candidate_id]
    return [
        command_action(f"Accept forge's {prop.label} candidate for {module.name}", "forge.accept", args),
        command_action("Reject forge's candidate", "forge.reject", args),
        command_action("Show forge's candidate diff", "forge.showDiff", args),
    ]


def _proposal(ls: ForgeServer, uri: str, target: str, candidate_id: str) -> Proposal | None:
    prop = ls.state.proposals.get((uri, target))
    return prop if prop is not None and prop.candidate_id == candidate_id else None


def _rewrite(ls: ForgeServer, prop: Proposal, text: str):
    """(the rewrite of the proposal's class in `text`, None) or (None, why it cannot be rewritten)."""
    from ...usecases import UseCaseError
    from ...usecases.apply import rewrite_for

    try:
        rewrite = rewrite_for(
            text,
            prop.target,
            prop.source,
            prop.domain,
            run_id=prop.run_id,
            candidate_id=prop.candidate_id,
            speedup=prop.speedup,
        )
        return rewrite, None
    except UseCaseError as exc:
        return None, str(exc)


def _decide(ls: ForgeServer, prop: Proposal, decision: DecisionKind) -> None:
    with ls.state.lock:
        ls.state.proposals.pop((prop.uri, prop.target), None)
        if decision == "rejected":
            ls.state.rejected.add((prop.uri, prop.target, text_sha(prop.source), prop.doc_sha))
        job = ls.state.jobs.get(prop.job_id or "")
        if job is not None:  # the runs view says what became of the offer
            job.decision = decision
            job.message = {
                "accepted": f"{prop.label} candidate {prop.candidate_id} accepted",
                "rejected": f"candidate {prop.candidate_id} ({prop.label}) rejected",
                "stale": f"candidate {prop.candidate_id} not applied: {prop.target} changed since the run",
            }.get(decision, job.message)
    log.info("%s: candidate %s of run %s for %s %s", prop.uri, prop.candidate_id, prop.run_id, prop.target, decision)
    if ls.store is not None:
        ls.store.add_event(
            prop.run_id, Decision(kind=decision, candidate=prop.candidate_id, uri=prop.uri, target=prop.target)
        )
    ls.set_diagnostics(prop.uri, f"proposal:{prop.target}", [])
    ls.refresh_lenses()


async def accept(ls: ForgeServer, args: CandidateArgs) -> AcceptResult:
    uri, target, run_id, candidate_id = args.uri, args.class_name, args.run_id, args.candidate_id
    prop = _proposal(ls, uri, target, candidate_id)
    if prop is None:
        return _refuse(ls, f"no open proposal {candidate_id} for {target}: it was applied, rejected or became stale")
    text = ls.doc_text(uri)
    if text is None or text_sha(text) != prop.doc_sha:
        _decide(ls, prop, "stale")
        return _refuse(
            ls,
            f"{target} changed since run {run_id}, so the candidate was not applied (nothing was "
            "changed). Run Optimize again on the current code.",
        )
    rewrite, error = _rewrite(ls, prop, text)
    if rewrite is None:
        return _refuse(ls, error or "cannot rewrite")
    version = ls.doc_version(uri)
    rng = t.Range(
        start=t.Position(line=rewrite.start_line, character=0), end=t.Position(line=rewrite.end_line, character=0)
    )
    caps = ls.client_capabilities.workspace
    annotated = bool(caps and caps.workspace_edit and caps.workspace_edit.change_annotation_support)
    label = f"forge: {prop.label} candidate for {target} (run {run_id})"
    edit_item: t.TextEdit | t.AnnotatedTextEdit = (
        t.AnnotatedTextEdit(range=rng, new_text=rewrite.replacement, annotation_id="forge-accept")
        if annotated
        else t.TextEdit(range=rng, new_text=rewrite.replacement)
    )
    edit = t.WorkspaceEdit(
        document_changes=[
            t.TextDocumentEdit(
                text_document=t.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version), edits=[edit_item]
            )
        ],
        change_annotations={
            "forge-accept": t.ChangeAnnotation(label=label, needs_confirmation=False, description=rewrite.summary)
        }
        if annotated
        else None,
    )
    accepting = ls.state.accepting
    accepting[uri] = rewrite.new_text
    try:
        reply = await ls.workspace_apply_edit_async(t.ApplyWorkspaceEditParams(edit=edit, label=label))
        applied = await _confirm(ls, uri, rewrite.new_text)
    finally:
        accepting.pop(uri, None)
    if not applied:  # the client's `applied` flag is not trusted either way: the text decides
        now = ls.doc_text(uri)
        if now is not None and now != text:
            return _refuse(
                ls,
                f"the document changed while forge's edit was being applied, and it is not the "
                f"rewritten module; check {target} (undo restores it) and run Optimize again",
            )
        why = getattr(reply, "failure_reason", None) or "the document did not change to the rewritten module"
        return _refuse(ls, f"the editor did not apply forge's edit ({why}); your code is unchanged")
    _decide(ls, prop, "accepted")
    ls.clear_file_results(uri, "accepted")
    return AcceptResult(applied=True, uri=uri, candidate=candidate_id)


async def _confirm(ls: ForgeServer, uri: str, expected: str) -> bool:
    deadline = asyncio.get_running_loop().time() + CONFIRM_S
    while asyncio.get_running_loop().time() < deadline:
        if ls.doc_text(uri) == expected:
            return True
        await asyncio.sleep(0.05)
    return False


def reject(ls: ForgeServer, args: CandidateArgs) -> RejectResult:
    prop = _proposal(ls, args.uri, args.class_name, args.candidate_id)
    if prop is None:
        return RejectResult(rejected=False, message="no such proposal")
    _decide(ls, prop, "rejected")
    return RejectResult(rejected=True)


async def show_diff(ls: ForgeServer, args: CandidateArgs) -> DiffResult:
    """The rewritten file and its diff against the document, written under `.forge/proposals/`; unless
    the client asked only for the texts, the diff is opened with `window/showDocument`."""
    prop = _proposal(ls, args.uri, args.class_name, args.candidate_id)
    text = ls.doc_text(args.uri)
    if prop is None or text is None:
        return DiffResult(error="no such proposal")
    rewrite, error = _rewrite(ls, prop, text)
    if rewrite is None:
        return DiffResult(error=error)
    name = Path(ls.path_of(args.uri) or "module.py").name
    folder = ls.forge_dir("proposals", _safe(prop.run_id), _safe(prop.candidate_id))
    proposed, patch = folder / name, folder / f"{name}.diff"
    unified = "".join(
        difflib.unified_diff(
            text.splitlines(keepends=True),
            rewrite.new_text.splitlines(keepends=True),
            fromfile=f"a/{name}",
            tofile=f"b/{name} (forge {prop.candidate_id})",
        )
    )
    proposed.write_text(rewrite.new_text, encoding="utf-8")
    patch.write_text(
        f"# forge: {prop.label} faster candidate for {prop.target} (run {prop.run_id})\n"
        f"# {prop.summary}\n# Accept or Reject it from the code lens on {prop.target}.\n" + unified,
        encoding="utf-8",
    )
    result = DiffResult(
        original=text,
        proposed=rewrite.new_text,
        diff=unified,
        speedup=prop.speedup,
        search_speedup=prop.search_speedup,
        summary=prop.summary,
        stale=text_sha(text) != prop.doc_sha,
        proposed_uri=proposed.as_uri(),
        diff_uri=patch.as_uri(),
    )
    window = ls.client_capabilities.window
    if (
        (args.options is None or args.options.show)
        and window is not None
        and window.show_document is not None
        and window.show_document.support
    ):
        try:
            shown = await ls.window_show_document_async(t.ShowDocumentParams(uri=patch.as_uri(), take_focus=True))
            opened = bool(shown and shown.success)
        except Exception:  # noqa: BLE001 - an error reply: the files are written all the same
            opened = False
        if not opened:
            ls.message(f"forge: the editor did not open {patch}", t.MessageType.Warning)
    return result


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)[:80]


def _refuse(ls: ForgeServer, message: str) -> AcceptResult:
    ls.message(f"forge: {message}", t.MessageType.Warning)
    return AcceptResult(applied=False, message=message)


FEATURE = Unit("accept", register, code_lenses=code_lenses, code_actions=code_actions)
