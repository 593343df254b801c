// Inline review of a proposed candidate in the document's own editor: removed lines in red,
// added lines in green, Accept · Reject code lenses per hunk (and keybindings), Accept all /
// Reject all. The pure state machine is ReviewSession (session.ts); this file binds it to VS Code.
//
// How it stays honest with the server:
// - While a review is in the buffer, the document's changes are held back from the server (the
//   server would otherwise drop its proposal on the first change). The file on disk is never
//   written by the review.
// - When every hunk is decided: nothing accepted -> `forge.reject` (recorded in the run store),
//   then the server gets the document's text again. Something accepted -> the buffer goes back to
//   the exact text the server has, `forge.accept` runs, and the server's own versioned edit is
//   applied (the server confirms it from the text and records the decision); then the hunks the
//   user rejected and any edits the user made meanwhile are put back on top.

import * as vscode from "vscode";
import { ApplyWorkspaceEditParams, ApplyWorkspaceEditResult } from "vscode-languageclient/node";
import { ServerManager } from "../client";
import { candidateArgs, CandidateRef, COMMANDS, parseAccept, parseReject, ShowDiff } from "../protocol";
import { Edit, finalPlan, minimalEdit, ReviewHunk, ReviewSession } from "./session";

type Phase = "starting" | "reviewing" | "finalizing" | "done";

interface Review {
  uri: string;
  ref: CandidateRef;
  diff: ShowDiff;
  session: ReviewSession;
  phase: Phase;
  /** Changes are held back from the server while true. */
  hold: boolean;
  /** Set while forge.accept is expected to send its edit: the buffer holds exactly this text. */
  expectServerEdit?: string;
}

/** Wait (briefly) for a condition that the document's change event makes true. */
async function settle(done: () => boolean, timeoutMs = 1000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 10));
  }
  return true;
}

function toWorkspaceEdit(doc: vscode.TextDocument, edits: Edit[]): vscode.WorkspaceEdit {
  const we = new vscode.WorkspaceEdit();
  for (const e of edits) {
    we.replace(doc.uri, new vscode.Range(doc.positionAt(e.offset), doc.positionAt(e.offset + e.length)), e.text);
  }
  return we;
}

export class InlineReviews implements vscode.Disposable, vscode.CodeLensProvider {
  private readonly reviews = new Map<string, Review>();
  private readonly disposables: vscode.Disposable[] = [];
  private readonly lensChanged = new vscode.EventEmitter<void>();
  readonly onDidChangeCodeLenses = this.lensChanged.event;
  private readonly removedDeco = vscode.window.createTextEditorDecorationType({
    isWholeLine: true,
    backgroundColor: new vscode.ThemeColor("diffEditor.removedLineBackground"),
    overviewRulerColor: new vscode.ThemeColor("editorOverviewRuler.deletedForeground"),
    overviewRulerLane: vscode.OverviewRulerLane.Left,
    textDecoration: "line-through",
  });
  private readonly addedDeco = vscode.window.createTextEditorDecorationType({
    isWholeLine: true,
    backgroundColor: new vscode.ThemeColor("diffEditor.insertedLineBackground"),
    overviewRulerColor: new vscode.ThemeColor("editorOverviewRuler.addedForeground"),
    overviewRulerLane: vscode.OverviewRulerLane.Left,
  });

  constructor(private readonly server: ServerManager) {
    this.disposables.push(
      this.removedDeco, this.addedDeco, this.lensChanged,
      vscode.languages.registerCodeLensProvider({ scheme: "file" }, this),
      vscode.languages.registerCodeLensProvider({ scheme: "untitled" }, this),
      vscode.workspace.onDidChangeTextDocument((e) => this.onChange(e)),
      vscode.workspace.onDidCloseTextDocument((d) => this.onClose(d)),
      vscode.workspace.onWillSaveTextDocument((e) => {
        if (this.reviews.get(e.document.uri.toString())?.phase === "reviewing") {
          void vscode.window.showWarningMessage("Forge: this file is saved with the review's lines in it (removed and added). " +
            "Finish the review (Accept/Reject) to get a clean file; Reject all restores the original text.");
        }
      }),
      vscode.window.onDidChangeVisibleTextEditors(() => this.decorateAll()),
      vscode.window.onDidChangeActiveTextEditor(() => this.updateContext()),
    );
  }

  // ------------------------------------------------------------------ hooks for the client
  holdChanges(uri: string): boolean {
    return this.reviews.get(uri)?.hold === true;
  }

  hideServerFeatures(uri: string): boolean {
    return this.reviews.has(uri);
  }

  isReviewing(uri: string): boolean {
    const r = this.reviews.get(uri);
    return r !== undefined && r.phase === "reviewing";
  }

  /** The server's `workspace/applyEdit` during a finalizing accept (see the header). */
  async handleApplyEdit(params: ApplyWorkspaceEditParams,
    next: (p: ApplyWorkspaceEditParams) => Promise<ApplyWorkspaceEditResult>): Promise<ApplyWorkspaceEditResult> {
    const uris = (params.edit.documentChanges ?? [])
      .map((c) => ("textDocument" in c ? c.textDocument.uri : undefined))
      .filter((u): u is string => typeof u === "string");
    const review = uris.map((u) => this.reviews.get(vscode.Uri.parse(u).toString())).find((r) => r?.expectServerEdit !== undefined);
    if (!review) {
      // a server edit for a document in review (another command): refuse, the buffer is not the server's text
      if (uris.some((u) => this.reviews.get(vscode.Uri.parse(u).toString())?.hold)) {
        return { applied: false, failureReason: "the document is under an inline forge review" };
      }
      return next(params);
    }
    const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === review.uri);
    const expected = review.expectServerEdit;
    review.expectServerEdit = undefined;
    if (!doc || doc.getText() !== expected) {
      return { applied: false, failureReason: "the document changed while forge was applying the review" };
    }
    // the server's text is the buffer's text again: let it know the current version, then apply
    // its edit (which it computed for that text) and let the change reach it normally
    review.hold = false;
    await this.server.resync(doc);
    const applied = await this.server.applyServerEdit(params);
    return { applied };
  }

  // ------------------------------------------------------------------ starting a review
  async start(ref: CandidateRef, diff: ShowDiff): Promise<void> {
    const uri = vscode.Uri.parse(ref.uri);
    const key = uri.toString();
    if (diff.stale) {
      void vscode.window.showWarningMessage(`Forge: ${ref.className} changed since run ${ref.runId}; run Optimize again on the current code.`);
      return;
    }
    const existing = this.reviews.get(key);
    const doc = await vscode.workspace.openTextDocument(uri);
    await vscode.window.showTextDocument(doc, { preview: false });
    if (existing) {
      void vscode.window.showInformationMessage("Forge: this file is already under review: accept or reject its hunks first.");
      return;
    }
    if (doc.getText() !== diff.original) {
      void vscode.window.showWarningMessage("Forge: the editor's text differs from the text forge compared against; " +
        "try Show diff again in a moment.");
      return;
    }
    const eol = doc.eol === vscode.EndOfLine.CRLF ? "\r\n" : "\n";
    const { session, edits } = ReviewSession.create(diff.original, diff.proposed, eol);
    if (session.hunks.length === 0) {
      void vscode.window.showInformationMessage("Forge: the candidate does not change this file.");
      return;
    }
    const review: Review = { uri: key, ref, diff, session, phase: "starting", hold: true };
    this.reviews.set(key, review);
    if (edits.length > 0) {
      const ok = await vscode.workspace.applyEdit(toWorkspaceEdit(doc, edits));
      if (!ok || !(await settle(() => !session.busy)) || session.text !== doc.getText()) {
        await this.abandon(review, "the editor did not take the review's lines");
        return;
      }
    }
    review.phase = "reviewing";
    this.refresh();
    const speed = diff.speedup !== null ? `${diff.speedup.toFixed(2)}× ` : "";
    void vscode.window.setStatusBarMessage(`forge: reviewing the ${speed}candidate for ${ref.className} — ` +
      `${session.hunks.length} hunk${session.hunks.length === 1 ? "" : "s"}`, 8000);
  }

  // ------------------------------------------------------------------ decisions
  private reviewFor(uri?: unknown): Review | undefined {
    const key = typeof uri === "string" ? vscode.Uri.parse(uri).toString()
      : uri instanceof vscode.Uri ? uri.toString() : vscode.window.activeTextEditor?.document.uri.toString();
    const r = key ? this.reviews.get(key) : undefined;
    return r && r.phase === "reviewing" ? r : undefined;
  }

  /** The hunk for a command: its index when given (code lens), else the one at the cursor. */
  private hunkFor(review: Review, index?: unknown): ReviewHunk | undefined {
    if (typeof index === "number") return review.session.hunks[index]?.status === "pending" ? review.session.hunks[index] : undefined;
    const editor = vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === review.uri);
    const offset = editor ? editor.document.offsetAt(editor.selection.active) : 0;
    return review.session.hunkAt(offset);
  }

  async decide(kind: "accept" | "reject" | "acceptAll" | "rejectAll", uri?: unknown, index?: unknown): Promise<void> {
    const review = this.reviewFor(uri);
    if (!review) {
      void vscode.window.showInformationMessage("Forge: no inline review in this editor.");
      return;
    }
    const s = review.session;
    if (s.busy) return;
    let edits: Edit[];
    if (kind === "acceptAll") edits = s.acceptAll();
    else if (kind === "rejectAll") edits = s.rejectAll();
    else {
      const h = this.hunkFor(review, index);
      if (!h) return;
      edits = kind === "accept" ? s.accept(h.index) : s.reject(h.index);
    }
    if (edits.length > 0) {
      const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(review.uri));
      const ok = await vscode.workspace.applyEdit(toWorkspaceEdit(doc, edits));
      if (!ok) {
        s.cancelOwn();
        void vscode.window.showWarningMessage("Forge: the editor refused the change; the hunk stays pending.");
      } else if (!(await settle(() => !s.busy))) {
        // no matching change event came: forget the operation (a later event counts as the user's)
        s.cancelOwn();
      }
    }
    this.refresh();
    await this.maybeFinish(review);
  }

  private async onChange(e: vscode.TextDocumentChangeEvent): Promise<void> {
    const review = this.reviews.get(e.document.uri.toString());
    if (!review || e.contentChanges.length === 0) return;
    if (review.phase !== "reviewing" && review.phase !== "starting") return;
    const result = review.session.applyEvent(e.contentChanges.map((c) => ({ offset: c.rangeOffset, length: c.rangeLength, text: c.text })));
    if (review.session.text !== e.document.getText()) {
      await this.abandon(review, "lost track of the review's lines");
      return;
    }
    for (const h of result.dropped) {
      void vscode.window.showWarningMessage(`Forge: hunk ${h.index + 1} (line ${h.originalLine + 1} of the original) was dropped: ` +
        "you edited its lines, so they are left as you made them.");
    }
    if (review.phase === "reviewing") {
      this.refresh();
      if (!result.own) await this.maybeFinish(review);
    }
  }

  private async maybeFinish(review: Review): Promise<void> {
    if (review.phase !== "reviewing") return;
    const outcome = review.session.outcome();
    if (!outcome.finished) return;
    review.phase = "finalizing";
    this.refresh();
    try {
      await this.finalize(review);
    } finally {
      review.phase = "done";
      this.reviews.delete(review.uri);
      this.refresh();
    }
  }

  private async finalize(review: Review): Promise<void> {
    const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(review.uri));
    const outcome = review.session.outcome();
    const final = outcome.text;
    const args = candidateArgs(review.ref);
    const counts = `${outcome.accepted} accepted, ${outcome.rejected} rejected` + (outcome.dropped ? `, ${outcome.dropped} dropped` : "");
    if (finalPlan(outcome).kind === "reject") {
      let note = "";
      try {
        const r = parseReject(await this.server.serverCommand(COMMANDS.reject, args));
        if (!r.rejected) note = ` (forge did not record it: ${r.message || "no such proposal"})`;
      } catch (err) {
        note = ` (forge did not record it: ${String(err)})`;
      }
      review.hold = false;
      await this.server.resync(doc);
      void vscode.window.showInformationMessage(`Forge: candidate ${review.ref.candidateId} rejected (${counts})${note}.` +
        (outcome.isOriginal ? " The file is back to its original text." : ""));
      return;
    }
    // something accepted: the buffer goes back to the server's text, and forge.accept applies its edit
    const original = review.session.original;
    const back = minimalEdit(doc.getText(), original);
    if (back.length && !(await vscode.workspace.applyEdit(toWorkspaceEdit(doc, back)))) {
      review.hold = false;
      await this.server.resync(doc);
      void vscode.window.showErrorMessage("Forge: could not prepare the accept; the review's result stays in the buffer, " +
        "not recorded by forge.");
      return;
    }
    review.expectServerEdit = original;
    let result = { applied: false, message: "" };
    try {
      result = parseAccept(await this.server.serverCommand(COMMANDS.accept, args));
    } catch (err) {
      result = { applied: false, message: String(err) };
    }
    review.expectServerEdit = undefined;
    if (review.hold) {
      // the server never sent its edit: it has the original text, the buffer too
      review.hold = false;
      await this.server.resync(doc);
    }
    if (!result.applied) {
      if (doc.getText() === original) await vscode.workspace.applyEdit(toWorkspaceEdit(doc, minimalEdit(original, final)));
      void vscode.window.showWarningMessage(`Forge: the candidate was not accepted by forge (${result.message || "no reason given"}). ` +
        "Your review's result is in the buffer, not recorded as accepted.");
      return;
    }
    // put the rejected hunks and the user's own edits back on top of the server's edit
    const rest = minimalEdit(doc.getText(), final);
    if (rest.length) await vscode.workspace.applyEdit(toWorkspaceEdit(doc, rest));
    void vscode.window.showInformationMessage(`Forge: candidate ${review.ref.candidateId} accepted (${counts}). ` +
      "Save the file to keep it.");
  }

  /** Leave a review without deciding: the buffer stays as it is, the server gets its text again. */
  private async abandon(review: Review, why: string): Promise<void> {
    this.reviews.delete(review.uri);
    review.phase = "done";
    const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === review.uri);
    if (review.hold && doc) {
      review.hold = false;
      await this.server.resync(doc);
    }
    this.refresh();
    void vscode.window.showWarningMessage(`Forge: review stopped (${why}); the buffer is left as it is.`);
  }

  private onClose(doc: vscode.TextDocument): void {
    // closing the document ends the review; the server's proposal stays (it never saw the review)
    if (this.reviews.delete(doc.uri.toString())) this.refresh();
  }

  /** Server restarted: reviews cannot be finished against a new server. */
  async serverStopped(): Promise<void> {
    for (const review of [...this.reviews.values()]) {
      if (review.phase === "reviewing") await this.abandon(review, "the language server stopped");
    }
  }

  // ------------------------------------------------------------------ rendering
  private refresh(): void {
    this.decorateAll();
    this.lensChanged.fire();
    this.updateContext();
  }

  private updateContext(): void {
    const uri = vscode.window.activeTextEditor?.document.uri.toString();
    void vscode.commands.executeCommand("setContext", "forge.reviewActive", uri !== undefined && this.isReviewing(uri));
  }

  private decorateAll(): void {
    for (const editor of vscode.window.visibleTextEditors) {
      const review = this.reviews.get(editor.document.uri.toString());
      const removed: vscode.Range[] = [];
      const added: vscode.Range[] = [];
      if (review && review.phase === "reviewing") {
        const doc = editor.document;
        for (const h of review.session.pending()) {
          const r = review.session.ranges(h);
          if (r.removed[1] > r.removed[0]) removed.push(lineRange(doc, r.removed[0], r.removed[1]));
          if (r.added[1] > r.added[0]) added.push(lineRange(doc, r.added[0], r.added[1]));
        }
      }
      editor.setDecorations(this.removedDeco, removed);
      editor.setDecorations(this.addedDeco, added);
    }
  }

  provideCodeLenses(document: vscode.TextDocument): vscode.CodeLens[] {
    const review = this.reviews.get(document.uri.toString());
    if (!review || review.phase !== "reviewing") return [];
    const lenses: vscode.CodeLens[] = [];
    const pending = review.session.pending();
    const uri = review.uri;
    pending.forEach((h, i) => {
      const line = document.positionAt(h.start).line;
      const range = new vscode.Range(line, 0, line, 0);
      if (i === 0) {
        const speed = review.diff.speedup !== null ? `${review.diff.speedup.toFixed(2)}× ` : "";
        lenses.push(new vscode.CodeLens(range, { title: `forge: ${speed}candidate · ${pending.length} pending`, command: "" }));
        lenses.push(new vscode.CodeLens(range, { title: "Accept all", command: "forge.review.acceptAll", arguments: [uri] }));
        lenses.push(new vscode.CodeLens(range, { title: "Reject all", command: "forge.review.rejectAll", arguments: [uri] }));
      }
      lenses.push(new vscode.CodeLens(range, { title: "✓ Accept", tooltip: "Accept this hunk (Ctrl+Alt+Y)", command: "forge.review.acceptHunk", arguments: [uri, h.index] }));
      lenses.push(new vscode.CodeLens(range, { title: "✗ Reject", tooltip: "Reject this hunk (Ctrl+Alt+N)", command: "forge.review.rejectHunk", arguments: [uri, h.index] }));
    });
    return lenses;
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }
}

function lineRange(doc: vscode.TextDocument, start: number, end: number): vscode.Range {
  const a = doc.positionAt(start);
  const b = doc.positionAt(Math.max(start, end - 1));
  return new vscode.Range(a.line, 0, b.line, 0);
}
