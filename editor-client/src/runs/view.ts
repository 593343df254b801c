// The Runs view (a tree in the Forge activity-bar container) and the status-bar item, fed by
// `forge/runs` (polled while a run is active) and by the `$/progress` values the client handles.

import * as vscode from "vscode";
import { ServerManager } from "../client";
import { isActive, Job, jobIdOfToken, parseProgress, parseRuns, RUNS_REQUEST } from "../protocol";
import { applyProgress, detailNodes, newlyFinished, Node, pollDelayMs, rootNodes, runNode, statusBar } from "./model";

export class RunsView implements vscode.TreeDataProvider<Node>, vscode.Disposable {
  jobs: Job[] = [];
  private readonly changed = new vscode.EventEmitter<Node | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private readonly finished = new vscode.EventEmitter<Job>();
  /** A run that went from active to finished. */
  readonly onDidFinish = this.finished.event;
  private readonly updated = new vscode.EventEmitter<Job[]>();
  readonly onDidUpdate = this.updated.event;
  private readonly status: vscode.StatusBarItem;
  private readonly disposables: vscode.Disposable[] = [];
  private timer: NodeJS.Timeout | undefined;
  private failures = 0;
  private inFlight = false;

  constructor(private readonly server: ServerManager) {
    this.status = vscode.window.createStatusBarItem("forge.runs", vscode.StatusBarAlignment.Left, 50);
    this.status.name = "Forge runs";
    this.status.command = "forge.runs.focus";
    this.disposables.push(this.status, this.changed, this.finished, this.updated,
      vscode.window.registerTreeDataProvider("forge.runs", this));
  }

  // ------------------------------------------------------------------ data
  /** Fetch `forge/runs` now and keep polling while a run is active. */
  async refresh(): Promise<void> {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    if (!this.server.running) {
      this.set([]);
      return;
    }
    if (this.inFlight) return;
    this.inFlight = true;
    try {
      const reply = await this.server.request<unknown>(RUNS_REQUEST, null);
      this.failures = 0;
      this.set(parseRuns(reply));
    } catch (err) {
      this.failures++;
      this.server.output.debug(`forge/runs failed: ${String(err)}`);
    } finally {
      this.inFlight = false;
    }
    const delay = pollDelayMs(this.jobs, this.failures);
    if (delay !== null) this.timer = setTimeout(() => void this.refresh(), delay);
  }

  /** A run was started or cancelled: poll now. */
  kick(): void {
    setTimeout(() => void this.refresh(), 150);
  }

  onProgress(token: string | number, value: unknown): void {
    const jobId = jobIdOfToken(token);
    const progress = parseProgress(value);
    if (!jobId || !progress) return;
    if (!this.jobs.some((j) => j.id === jobId) || progress.kind !== "report") {
      this.kick(); // a new job, or its start/end: the list changes
    }
    this.set(applyProgress(this.jobs, jobId, progress), false);
  }

  private set(jobs: Job[], announce = true): void {
    const done = announce ? newlyFinished(this.jobs, jobs) : [];
    this.jobs = jobs;
    this.changed.fire(undefined);
    this.updated.fire(jobs);
    const bar = statusBar(jobs);
    if (bar) {
      this.status.text = bar.text;
      this.status.tooltip = bar.tooltip;
      this.status.show();
    } else {
      this.status.hide();
    }
    for (const j of done) this.finished.fire(j);
  }

  job(id: string): Job | undefined {
    return this.jobs.find((j) => j.id === id);
  }

  hasActive(): boolean {
    return this.jobs.some(isActive);
  }

  // ------------------------------------------------------------------ tree
  getChildren(element?: Node): Node[] {
    const now = Date.now() / 1000;
    if (!element) return rootNodes(this.jobs);
    if (element.type === "group") return element.jobs.map((j) => runNode(j, now));
    if (element.type === "run") return detailNodes(element.job, now);
    return [];
  }

  getTreeItem(node: Node): vscode.TreeItem {
    if (node.type === "group") {
      const item = new vscode.TreeItem(node.label, node.id === "done" && node.jobs.length > 5
        ? vscode.TreeItemCollapsibleState.Collapsed : vscode.TreeItemCollapsibleState.Expanded);
      item.id = `group:${node.id}`;
      item.contextValue = `forgeGroup.${node.id}`;
      return item;
    }
    if (node.type === "run") {
      const item = new vscode.TreeItem(node.label, vscode.TreeItemCollapsibleState.Collapsed);
      item.id = node.id;
      item.description = node.description;
      item.tooltip = node.tooltip;
      item.iconPath = new vscode.ThemeIcon(node.icon);
      item.contextValue = node.contextValue;
      item.command = { title: "Show Run Details", command: "forge.runs.openDetails", arguments: [node] };
      return item;
    }
    const item = new vscode.TreeItem(node.label, vscode.TreeItemCollapsibleState.None);
    item.id = node.id;
    item.description = node.description;
    return item;
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    for (const d of this.disposables) d.dispose();
  }
}
