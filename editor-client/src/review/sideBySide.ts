// Side-by-side review: VS Code's diff editor between the file and a read-only virtual document
// (`forge-candidate:` scheme) holding the proposed text; Accept / Reject in the editor title.

import * as vscode from "vscode";
import { ServerManager } from "../client";
import { candidateArgs, CandidateRef, COMMANDS, parseAccept, parseReject, ShowDiff, speedupLabel } from "../protocol";
import { columnFor } from "./inline";

export const SCHEME = "forge-candidate";

interface Entry {
  ref: CandidateRef;
  text: string;
}

/** `forge-candidate:` URI for a candidate: same path (so the language is detected), the candidate in the query. */
export function candidateUri(ref: CandidateRef): vscode.Uri {
  const file = vscode.Uri.parse(ref.uri);
  const query = new URLSearchParams({ uri: ref.uri, run: ref.runId, candidate: ref.candidateId, cls: ref.className }).toString();
  return vscode.Uri.from({ scheme: SCHEME, path: file.path, query });
}

export class SideBySide implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly entries = new Map<string, Entry>();
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly server: ServerManager) {
    this.disposables.push(
      vscode.workspace.registerTextDocumentContentProvider(SCHEME, this),
      vscode.window.tabGroups.onDidChangeTabs(() => this.updateContext()),
      vscode.window.onDidChangeActiveTextEditor(() => this.updateContext()),
      this.changed,
    );
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.entries.get(uri.toString())?.text ??
      "# forge: this candidate is no longer available (accepted, rejected, or the server restarted).\n";
  }

  async open(ref: CandidateRef, diff: ShowDiff): Promise<void> {
    const cand = candidateUri(ref);
    this.entries.set(cand.toString(), { ref, text: diff.proposed });
    this.changed.fire(cand);
    const name = vscode.Uri.parse(ref.uri).path.split("/").pop() ?? ref.uri;
    const speed = diff.speedup !== null ? ` ${speedupLabel(diff.speedup, diff.searchSpeedup)}` : "";
    const stale = diff.stale ? " (stale)" : "";
    const file = vscode.Uri.parse(ref.uri);
    // in the file's own editor group, not beside a webview that asked for it
    await vscode.commands.executeCommand("vscode.diff", file, cand,
      `${name} ↔ forge ${ref.candidateId}${speed}${stale}`, { preview: false, viewColumn: columnFor(file) });
    this.updateContext();
  }

  /** The candidate shown in the active diff editor (or the active candidate document). */
  private activeEntry(): { uri: vscode.Uri; entry: Entry } | undefined {
    const tab = vscode.window.tabGroups.activeTabGroup.activeTab;
    const input = tab?.input;
    let uri: vscode.Uri | undefined;
    if (input instanceof vscode.TabInputTextDiff) uri = input.modified.scheme === SCHEME ? input.modified : undefined;
    if (!uri) {
      const active = vscode.window.activeTextEditor?.document.uri;
      if (active?.scheme === SCHEME) uri = active;
    }
    const entry = uri ? this.entries.get(uri.toString()) : undefined;
    return uri && entry ? { uri, entry } : undefined;
  }

  private updateContext(): void {
    void vscode.commands.executeCommand("setContext", "forge.sideBySideActive", this.activeEntry() !== undefined);
  }

  async decide(kind: "accept" | "reject"): Promise<void> {
    const active = this.activeEntry();
    if (!active) {
      void vscode.window.showInformationMessage("Forge: no forge candidate in the active editor.");
      return;
    }
    const args = candidateArgs(active.entry.ref);
    try {
      if (kind === "accept") {
        const r = parseAccept(await this.server.serverCommand(COMMANDS.accept, args));
        if (!r.applied) {
          void vscode.window.showWarningMessage(`Forge: not accepted: ${r.message || "no reason given"}`);
          return;
        }
        const file = vscode.Uri.parse(active.entry.ref.uri);
        const dirty = vscode.workspace.textDocuments.find((d) => d.uri.toString() === file.toString())?.isDirty;
        const autosave = vscode.workspace.getConfiguration("files", file).get<string>("autoSave", "off") !== "off";
        void vscode.window.showInformationMessage(`Forge: candidate ${active.entry.ref.candidateId} accepted.` +
          (dirty && !autosave ? " Save the file to keep it." : ""));
      } else {
        const r = parseReject(await this.server.serverCommand(COMMANDS.reject, args));
        void vscode.window.showInformationMessage(r.rejected ? `Forge: candidate ${active.entry.ref.candidateId} rejected.`
          : `Forge: nothing to reject (${r.message || "no such proposal"}).`);
      }
    } catch (err) {
      void vscode.window.showErrorMessage(`Forge: ${String(err)}`);
      return;
    }
    this.entries.delete(active.uri.toString());
    await this.closeTabsOf(active.uri);
    this.updateContext();
  }

  private async closeTabsOf(uri: vscode.Uri): Promise<void> {
    const tabs = vscode.window.tabGroups.all.flatMap((g) => g.tabs).filter((t) =>
      (t.input instanceof vscode.TabInputTextDiff && t.input.modified.toString() === uri.toString()) ||
      (t.input instanceof vscode.TabInputText && t.input.uri.toString() === uri.toString()));
    if (tabs.length) await vscode.window.tabGroups.close(tabs);
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }
}
