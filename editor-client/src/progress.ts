// The server's work-done progress as ONE cancellable notification per job.
//
// vscode-languageclient 11 shows server-initiated progress in the status bar only and ignores
// `cancellable`. This feature takes its place (the client leaves its own out, see client.ts): it
// answers `window/workDoneProgress/create`, shows a notification with the job's title, message and
// percentage, and its Cancel button sends `window/workDoneProgress/cancel` for the token (the
// server stops the job and kills its workers). The notification closes at the progress end.

import * as vscode from "vscode";
import {
  BaseLanguageClient,
  ClientCapabilities,
  FeatureState,
  StaticFeature,
  WorkDoneProgress,
  WorkDoneProgressBegin,
  WorkDoneProgressCancelNotification,
  WorkDoneProgressCreateRequest,
  WorkDoneProgressReport,
} from "vscode-languageclient/node";

/** The languageclient's own progress feature (status bar only), recognized by the request it serves. */
export function isBuiltinProgressFeature(feature: unknown): boolean {
  if (feature instanceof ProgressNotifications) return false;
  const f = feature as { getState?: () => FeatureState };
  if (typeof f?.getState !== "function") return false;
  try {
    const state = f.getState();
    return state.kind === "window" && state.id === WorkDoneProgressCreateRequest.method;
  } catch {
    return false;
  }
}

class Notification {
  private progress?: vscode.Progress<{ message?: string; increment?: number }>;
  private resolve?: () => void;
  private reported = 0;
  private listener?: vscode.Disposable;
  private pending?: WorkDoneProgressBegin | WorkDoneProgressReport;

  constructor(private readonly client: BaseLanguageClient, private readonly token: string | number,
    private readonly done: (n: Notification) => void) {
    this.listener = client.onProgress(WorkDoneProgress.type, token, (value) => {
      if (value.kind === "begin") this.begin(value);
      else if (value.kind === "report") this.report(value);
      else this.end();
    });
  }

  private begin(value: WorkDoneProgressBegin): void {
    void vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: value.title, cancellable: value.cancellable === true },
      (progress, cancel) => {
        if (!this.listener) return Promise.resolve(); // ended before the notification showed
        this.progress = progress;
        cancel.onCancellationRequested(() => {
          void this.client.sendNotification(WorkDoneProgressCancelNotification.type, { token: this.token });
        });
        this.report(this.pending ?? value);
        return new Promise<void>((resolve) => (this.resolve = resolve));
      });
  }

  private report(value: WorkDoneProgressBegin | WorkDoneProgressReport): void {
    if (!this.progress) {
      this.pending = value;
      return;
    }
    const pct = typeof value.percentage === "number" ? Math.max(0, Math.min(100, value.percentage)) : undefined;
    const increment = pct !== undefined ? Math.max(0, pct - this.reported) : undefined;
    if (increment !== undefined) this.reported += increment;
    this.progress.report({ message: value.message, increment });
  }

  end(): void {
    this.listener?.dispose();
    this.listener = undefined;
    this.resolve?.();
    this.resolve = undefined;
    this.done(this);
  }
}

export class ProgressNotifications implements StaticFeature {
  private readonly active = new Set<Notification>();

  constructor(private readonly client: BaseLanguageClient) {}

  fillClientCapabilities(capabilities: ClientCapabilities): void {
    capabilities.window = capabilities.window ?? {};
    capabilities.window.workDoneProgress = true;
  }

  initialize(): void {
    this.client.onRequest(WorkDoneProgressCreateRequest.type, (params) => {
      this.active.add(new Notification(this.client, params.token, (n) => this.active.delete(n)));
    });
  }

  getState(): FeatureState {
    return { kind: "window", id: WorkDoneProgressCreateRequest.method, registrations: this.active.size > 0 };
  }

  clear(): void {
    for (const n of [...this.active]) n.end();
    this.active.clear();
  }
}
