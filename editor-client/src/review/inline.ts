// Inline review of a proposed candidate: the file's text with, for every hunk, the original lines
// in red (struck through) followed by the proposed lines in green, Accept · Reject code lenses per
// hunk (and keybindings), Accept all / Reject all. The pure state machine is ReviewSession
// (session.ts); this file binds it to VS Code.
//
// The review lives in its own document, `forge-review:` "<name> (forge review).<ext>", opened in the
// file's editor group, backed by an in-memory file system. The file itself is not touched until the
// decision, so nothing of the review can reach the disk, whatever the autosave setting: saving the
// review document (by hand or by autosave) stays in memory. The server never sees review text.
//
// When every hunk is decided: nothing accepted -> `forge.reject` (recorded in the run store).
// Something accepted -> `forge.accept`, and the server's own versioned edit goes to the file (the
// server confirms it from the text); then the hunks the user rejected and any edits the user made
// in the review are put on top. The review document is closed and the file shown in its place.

import * as vscode from "vscode";
import { ServerManager } from "../client";
import { candidateArgs, CandidateRef, COMMANDS, parseAccept, parseReject, ShowDiff, speedupLabel } from "../protocol";
import { applyEdits, Edit, finalPlan, minimalEdit, ReviewHunk, ReviewSession } from "./session";

export const REVIEW_SCHEME = "forge-review";

type Phase = "opening" | "reviewing" | "finalizing" | "done";

interface Review {
  /** The file under review and its key (URI string). */
  file: vscode.Uri;
  fileKey: string;
  /** The review document (`forge-review:`) and its key. */
  uri: vscode.Uri;
  key: string;
  ref: CandidateRef;
  diff: ShowDiff;
  session: ReviewSession;
  phase: Phase;
  /** The status bar message, disposed when the review ends. */
  status?: vscode.Disposable;
  /** The user was told that saving the review document does not write the file. */
  saveNoted?: boolean;
}

let reviews = 0;

/**
 * A new review document for a file: same folder, "<stem> (forge review)<ext>" (the extension keeps the
 * language), and a query that is new for every review, so VS Code never hands back the document of an
 * earlier review of the same file (it keeps closed documents for a while).
 */
export function reviewUri(file: vscode.Uri): vscode.Uri {
  const slash = file.path.lastIndexOf("/");
  const name = file.path.slice(slash + 1);
  const dot = name.lastIndexOf(".");
  const [stem, ext] = dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ""];
  return vscode.Uri.from({ scheme: REVIEW_SCHEME, path: `${file.path.slice(0, slash + 1)}${stem} (forge review)${ext}`,
    query: `review=${++reviews}` });
}

/** The review documents' storage: memory only. Saving a review document never writes a file. */
class ReviewFiles implements vscode.FileSystemProvider {
  private readonly files = new Map<string, { data: Uint8Array; ctime: number; mtime: number }>();
  private readonly emitter = new vscode.EventEmitter<vscode.FileChangeEvent[]>();
  readonly onDidChangeFile = this.emitter.event;

  set(uri: vscode.Uri, text: string): void {
    const now = Date.now();
    this.files.set(uri.toString(), { data: Buffer.from(text, "utf8"), ctime: now, mtime: now });
    this.emitter.fire([{ type: vscode.FileChangeType.Changed, uri }]);
  }

  remove(uri: vscode.Uri): void {
    this.files.delete(uri.toString());
  }

  watch(): vscode.Disposable {
    return new vscode.Disposable(() => undefined);
  }

  stat(uri: vscode.Uri): vscode.FileStat {
    const f = this.files.get(uri.toString());
    if (f) return { type: vscode.FileType.File, ctime: f.ctime, mtime: f.mtime, size: f.data.byteLength };
    const prefix = uri.toString().replace(/\/?$/, "/");
    if ([...this.files.keys()].some((k) => k.startsWith(prefix))) return { type: vscode.FileType.Directory, ctime: 0, mtime: 0, size: 0 };
    throw vscode.FileSystemError.FileNotFound(uri);
  }

  readDirectory(): [string, vscode.FileType][] {
    return [];
  }

  createDirectory(): void {
    // folders are implicit
  }

  readFile(uri: vscode.Uri): Uint8Array {
    const f = this.files.get(uri.toString());
    if (!f) throw vscode.FileSystemError.FileNotFound(uri);
    return f.data;
  }

  writeFile(uri: vscode.Uri, content: Uint8Array): void {
    const f = this.files.get(uri.toString());
    if (!f) throw vscode.FileSystemError.NoPermissions("a forge review document is gone once the review ends");
    f.data = content;
    f.mtime = Date.now();
    this.emitter.fire([{ type: vscode.FileChangeType.Changed, uri }]);
  }

  delete(uri: vscode.Uri): void {
    this.files.delete(uri.toString());
  }

  rename(): void {
    throw vscode.FileSystemError.NoPermissions("forge review documents cannot be renamed");
  }
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

/** The editor group showing a document, else the active text editor's, else the first (never a webview's). */
export function columnFor(uri: vscode.Uri): vscode.ViewColumn {
  const key = uri.toString();
  return vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === key)?.viewColumn ??
    vscode.window.activeTextEditor?.viewColumn ?? vscode.ViewColumn.One;
}

export class InlineReviews implements vscode.Disposable, vscode.CodeLensProvider {
  private readonly reviews = new Map<string, Review>(); // by review document key
  private readonly files = new ReviewFiles();
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
      vscode.workspace.registerFileSystemProvider(REVIEW_SCHEME, this.files, { isCaseSensitive: true }),
      vscode.languages.registerCodeLensProvider({ scheme: REVIEW_SCHEME }, this),
      vscode.workspace.onDidChangeTextDocument((e) => this.onChange(e)),
      vscode.workspace.onDidSaveTextDocument((d) => this.onSave(d)),
      vscode.window.tabGroups.onDidChangeTabs(() => this.onTabs()),
      vscode.window.onDidChangeVisibleTextEditors(() => this.decorateAll()),
      vscode.window.onDidChangeActiveTextEditor(() => this.updateContext()),
    );
  }

  // ------------------------------------------------------------------ lookups
  /** The review of a file or of a review document (URI string), in any phase. */
  private find(uri: string): Review | undefined {
    const key = vscode.Uri.parse(uri).toString();
    return this.reviews.get(key) ?? [...this.reviews.values()].find((r) => r.fileKey === key);
  }

  /** True while the file (or the review document) is under an undecided review. */
  isReviewing(uri: string): boolean {
    return this.find(uri)?.phase === "reviewing";
  }

  // ------------------------------------------------------------------ starting a review
  async start(ref: CandidateRef, diff: ShowDiff): Promise<void> {
    const file = vscode.Uri.parse(ref.uri);
    if (diff.stale) {
      void vscode.window.showWarningMessage(`Forge: ${ref.className} changed since run ${ref.runId}; run Optimize again on the current code.`);
      return;
    }
    const existing = this.find(ref.uri);
    if (existing) {
      await vscode.window.showTextDocument(existing.uri, { viewColumn: columnFor(existing.uri), preview: false });
      void vscode.window.showInformationMessage("Forge: this file is already under review: accept or reject its hunks first.");
      return;
    }
    const doc = await vscode.workspace.openTextDocument(file);
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
    // the review text, as the session's own (already applied) operation
    const text = reviewText(session, diff.original, edits);
    const uri = reviewUri(file);
    this.files.set(uri, text);
    const review: Review = { file, fileKey: file.toString(), uri, key: uri.toString(), ref, diff, session, phase: "opening" };
    this.reviews.set(review.key, review);
    const reviewDoc = await vscode.workspace.openTextDocument(uri);
    if (reviewDoc.getText() !== session.text) {
      await this.end(review, "the review document did not open with the review's text");
      return;
    }
    // in the file's own editor group (not beside a webview that asked for the review)
    await vscode.window.showTextDocument(reviewDoc, { viewColumn: columnFor(file), preview: false });
    review.phase = "reviewing"; // from now on, closing its tab ends it
    this.refresh();
    const speed = diff.speedup !== null ? `${speedupLabel(diff.speedup, diff.searchSpeedup)} ` : "";
    review.status = vscode.window.setStatusBarMessage(`forge: reviewing the ${speed}candidate for ${ref.className} — ` +
      `${session.hunks.length} hunk${session.hunks.length === 1 ? "" : "s"}`);
  }

  // ------------------------------------------------------------------ decisions
  private reviewFor(uri?: unknown): Review | undefined {
    const key = typeof uri === "string" ? uri : uri instanceof vscode.Uri ? uri.toString()
      : vscode.window.activeTextEditor?.document.uri.toString();
    const r = key ? this.find(key) : undefined;
    return r && r.phase === "reviewing" ? r : undefined;
  }

  /** The hunk for a command: its index when given (code lens), else the one at the cursor. */
  private hunkFor(review: Review, index?: unknown): ReviewHunk | undefined {
    if (typeof index === "number") return review.session.hunks[index]?.status === "pending" ? review.session.hunks[index] : undefined;
    const editor = vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === review.key);
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
      const doc = await vscode.workspace.openTextDocument(review.uri);
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
    if (e.contentChanges.length === 0) return;
    const key = e.document.uri.toString();
    const review = this.reviews.get(key);
    if (!review) {
      // the file itself changed under its review (another editor, a tool, the disk): the review is void
      const underReview = [...this.reviews.values()].find((r) => r.fileKey === key && r.phase === "reviewing");
      if (underReview) await this.end(underReview, `${fileName(underReview.file)} changed during the review; run Optimize again`);
      return;
    }
    if (review.phase !== "reviewing") return;
    const result = review.session.applyEvent(e.contentChanges.map((c) => ({ offset: c.rangeOffset, length: c.rangeLength, text: c.text })));
    if (review.session.text !== e.document.getText()) {
      await this.end(review, "lost track of the review's lines");
      return;
    }
    for (const h of result.dropped) {
      void vscode.window.showWarningMessage(`Forge: hunk ${h.index + 1} (line ${h.originalLine + 1} of the original) was dropped: ` +
        "you edited its lines, so they are left as you made them.");
    }
    this.refresh();
    if (!result.own) await this.maybeFinish(review);
  }

  private onSave(doc: vscode.TextDocument): void {
    const review = this.reviews.get(doc.uri.toString());
    if (review?.phase === "reviewing" && !review.saveNoted) {
      // saving the review (by hand or autosave) keeps it in memory: say so once
      review.saveNoted = true;
      void vscode.window.setStatusBarMessage(`forge: the review is not saved to ${fileName(review.file)}; ` +
        "accept or reject its hunks to change the file", 5000);
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
      await this.end(review);
    }
  }

  private async finalize(review: Review): Promise<void> {
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
      const kept = outcome.isOriginal ? `${fileName(review.file)} is unchanged` :
        `${fileName(review.file)} is unchanged; your edits in the review are not applied`;
      void vscode.window.showInformationMessage(`Forge: candidate ${review.ref.candidateId} rejected (${counts})${note}. ${kept}.`);
      return;
    }
    // something accepted: forge.accept sends the server's versioned edit of the file
    let result = { applied: false, message: "" };
    try {
      result = parseAccept(await this.server.serverCommand(COMMANDS.accept, args));
    } catch (err) {
      result = { applied: false, message: String(err) };
    }
    if (!result.applied) {
      void vscode.window.showWarningMessage(`Forge: the candidate was not accepted by forge (${result.message || "no reason given"}); ` +
        `${fileName(review.file)} is unchanged.`);
      return;
    }
    // put the hunks the user rejected and the user's own edits in the review on top of the server's edit
    const doc = await vscode.workspace.openTextDocument(review.file);
    const rest = minimalEdit(doc.getText(), final);
    if (rest.length) await vscode.workspace.applyEdit(toWorkspaceEdit(doc, rest));
    const autosave = vscode.workspace.getConfiguration("files", review.file).get<string>("autoSave", "off") !== "off";
    void vscode.window.showInformationMessage(`Forge: candidate ${review.ref.candidateId} accepted (${counts}).` +
      (autosave || !doc.isDirty ? "" : " Save the file to keep it."));
  }

  /** End a review: close its document (nothing of it is kept), show the file again. */
  private async end(review: Review, why?: string): Promise<void> {
    if (review.phase === "done") return;
    const wasShown = vscode.window.visibleTextEditors.some((e) => e.document.uri.toString() === review.key);
    const column = columnFor(review.uri);
    review.phase = "done";
    review.status?.dispose();
    this.reviews.delete(review.key);
    this.refresh();
    const tabs = vscode.window.tabGroups.all.flatMap((g) => g.tabs)
      .filter((t) => t.input instanceof vscode.TabInputText && t.input.uri.toString() === review.key);
    const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === review.key);
    if (doc?.isDirty) await doc.save(); // into memory: closing must not ask to save a review
    if (tabs.length) await vscode.window.tabGroups.close(tabs, true);
    this.files.remove(review.uri);
    if (wasShown) await vscode.window.showTextDocument(review.file, { viewColumn: column, preview: false });
    if (why) void vscode.window.showWarningMessage(`Forge: review closed (${why}); ${fileName(review.file)} is unchanged.`);
  }

  /** The user closed a review's tab: the review ends undecided (the proposal stays open). */
  private onTabs(): void {
    for (const review of [...this.reviews.values()]) {
      if (review.phase !== "reviewing") continue;
      const open = vscode.window.tabGroups.all.some((g) => g.tabs.some((t) =>
        t.input instanceof vscode.TabInputText && t.input.uri.toString() === review.key));
      if (!open) {
        review.phase = "done";
        review.status?.dispose();
        this.reviews.delete(review.key);
        this.files.remove(review.uri);
        this.refresh();
      }
    }
    this.updateContext();
  }

  /** Server restarted: reviews cannot be finished against a new server. */
  async serverStopped(): Promise<void> {
    for (const review of [...this.reviews.values()]) {
      if (review.phase === "reviewing") await this.end(review, "the language server stopped");
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
      if (editor.document.uri.scheme !== REVIEW_SCHEME) continue;
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
    const uri = review.key;
    pending.forEach((h, i) => {
      const line = document.positionAt(h.start).line;
      const range = new vscode.Range(line, 0, line, 0);
      if (i === 0) {
        const speed = review.diff.speedup !== null ? `${speedupLabel(review.diff.speedup, review.diff.searchSpeedup)} ` : "";
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
    for (const review of this.reviews.values()) review.status?.dispose();
    for (const d of this.disposables) d.dispose();
  }
}

function fileName(uri: vscode.Uri): string {
  return uri.path.split("/").pop() ?? uri.path;
}

/** The review text: the session's initial operation (inserting the proposed lines), applied and committed. */
function reviewText(session: ReviewSession, original: string, edits: Edit[]): string {
  if (edits.length > 0) session.applyEvent([{ offset: 0, length: original.length, text: applyEdits(original, edits) }]);
  return session.text;
}

function lineRange(doc: vscode.TextDocument, start: number, end: number): vscode.Range {
  const a = doc.positionAt(start);
  const b = doc.positionAt(Math.max(start, end - 1));
  return new vscode.Range(a.line, 0, b.line, 0);
}
