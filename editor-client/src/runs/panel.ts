// The run details webview: one run's candidates (verdicts, times, speedups, findings, sources)
// and its open proposal, rendered from forge's data only, under a strict CSP.

import { randomBytes } from "crypto";
import { readFile } from "fs/promises";
import * as vscode from "vscode";
import { ServerManager } from "../client";
import { CandidateRef, COMMANDS, Job, parseShowDiff, ShowDiff, showDiffArgs } from "../protocol";
import { DetailsInput, makeNonce, parseRunDetails, Proposal, renderDetailsHtml, RunDetails } from "./details";
import { parseReportResult, reportArgs, reportWebviewHtml } from "./report";

export interface ProposalActions {
  /** The job's open proposal, if the server still offers it. */
  findProposal(job: Job): CandidateRef | undefined;
  review(ref: CandidateRef, diff: ShowDiff, mode: "inline" | "sideBySide"): Promise<void>;
  decide(ref: CandidateRef, kind: "accept" | "reject"): Promise<void>;
}

interface PanelState {
  panel: vscode.WebviewPanel;
  job: Job;
  ref?: CandidateRef;
  diff?: ShowDiff;
}

export class RunPanels implements vscode.Disposable {
  private readonly panels = new Map<string, PanelState>();
  private readonly reports = new Map<string, vscode.WebviewPanel>();

  constructor(private readonly server: ServerManager, private readonly actions: ProposalActions) {}

  async show(job: Job): Promise<void> {
    let state = this.panels.get(job.id);
    if (state) {
      state.panel.reveal();
    } else {
      const panel = vscode.window.createWebviewPanel("forge.runDetails", job.title, vscode.ViewColumn.Beside, {
        enableScripts: true,
        enableCommandUris: false,
        localResourceRoots: [],
        retainContextWhenHidden: false,
      });
      const created: PanelState = { panel, job };
      state = created;
      this.panels.set(job.id, created);
      const listener = panel.webview.onDidReceiveMessage((msg: unknown) => void this.onMessage(created, msg));
      panel.onDidDispose(() => {
        listener.dispose();
        this.panels.delete(job.id);
      });
    }
    await this.render(state, job);
  }

  private async onMessage(state: PanelState, msg: unknown): Promise<void> {
    const command = typeof msg === "object" && msg !== null ? (msg as { command?: unknown }).command : undefined;
    if (command === "report" && state.job.runId) {
      await this.openReport(state.job.runId);
      return;
    }
    const { ref, diff } = state;
    if (!ref || !diff) return;
    if (command === "review") await this.actions.review(ref, diff, "inline");
    else if (command === "sideBySide") await this.actions.review(ref, diff, "sideBySide");
    else if (command === "accept" || command === "reject") {
      await this.actions.decide(ref, command);
      await this.render(state, state.job);
    }
  }

  /** Re-render an open panel (its job changed). */
  async update(job: Job): Promise<void> {
    const state = this.panels.get(job.id);
    if (state) await this.render(state, job);
  }

  /** New `forge/runs` data: re-render the panels whose job ended, or whose candidate was decided (not on every
   * progress message: a re-render resets the page's scroll position). */
  async updateAll(jobs: Job[]): Promise<void> {
    for (const state of this.panels.values()) {
      const job = jobs.find((j) => j.id === state.job.id);
      const key = (j: Job) => JSON.stringify([j.status, j.decision, j.proposal?.candidateId ?? null]);
      if (job && key(job) !== key(state.job)) await this.render(state, job);
    }
  }

  private async render(state: PanelState, job: Job): Promise<void> {
    state.job = job;
    const file = job.uri ? vscode.workspace.asRelativePath(vscode.Uri.parse(job.uri), false) : "";
    const input: DetailsInput = { job, file, actions: false };
    const ref = job.kind === "optimize" ? this.actions.findProposal(job) : undefined;
    let diff: ShowDiff | undefined;
    if (ref) {
      try {
        const d = parseShowDiff(await this.server.serverCommand(COMMANDS.showDiff, showDiffArgs(ref)));
        if (!("error" in d)) diff = d;
      } catch {
        // no proposal after all
      }
    }
    if (ref && diff) {
      const p: Proposal = { candidateId: ref.candidateId, speedup: diff.speedup, searchSpeedup: diff.searchSpeedup,
        summary: diff.summary, diff: diff.diff, stale: diff.stale };
      input.proposal = p;
      input.actions = true;
    }
    if (job.runId) {
      const d = await this.readStore(job.runId);
      if ("error" in d) input.detailsError = d.error;
      else input.details = d;
    }
    state.ref = input.actions ? ref : undefined;
    state.diff = input.actions ? diff : undefined;
    const nonce = makeNonce((n) => randomBytes(n));
    state.panel.title = job.title;
    state.panel.webview.html = renderDetailsHtml(input, nonce);
  }

  /** The run's full report (`forge.openReport`, written by the server) in a webview of its own, beside the
   * details; opened again, it is made again (a run still going on shows more). */
  async openReport(runId: string): Promise<void> {
    let reply: unknown;
    try {
      reply = await this.server.serverCommand(COMMANDS.openReport, reportArgs(runId));
    } catch (err) {
      void vscode.window.showErrorMessage(`forge: the report could not be made: ${err instanceof Error ? err.message : String(err)}`);
      return;
    }
    const result = parseReportResult(reply);
    if ("error" in result) {
      void vscode.window.showErrorMessage(`forge: ${result.error}`);
      return;
    }
    const html = reportWebviewHtml(await readFile(result.path, "utf8"), makeNonce((n) => randomBytes(n)));
    if (typeof html !== "string") {
      void vscode.window.showErrorMessage(`forge: ${html.error}`);
      return;
    }
    let panel = this.reports.get(result.runId);
    if (panel) panel.reveal();
    else {
      panel = vscode.window.createWebviewPanel("forge.runReport", `Report ${result.runId}`, vscode.ViewColumn.Active, {
        enableScripts: true,
        enableCommandUris: false,
        localResourceRoots: [],
        retainContextWhenHidden: true,
      });
      const created = panel;
      this.reports.set(result.runId, created);
      created.onDidDispose(() => this.reports.delete(result.runId));
    }
    panel.webview.html = html;
  }

  /** One run's candidates, from the server's run store (`forge/run`). */
  private async readStore(runId: string): Promise<RunDetails | { error: string }> {
    try {
      return parseRunDetails(JSON.stringify(await this.server.request<unknown>("forge/run", { runId })));
    } catch (err) {
      return { error: `forge/run failed: ${err instanceof Error ? err.message : String(err)}` };
    }
  }

  dispose(): void {
    for (const s of this.panels.values()) s.panel.dispose();
    this.panels.clear();
    for (const p of this.reports.values()) p.dispose();
    this.reports.clear();
  }
}
