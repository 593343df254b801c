// The forge-lsp VS Code extension: starts the language server, reviews its candidates inline or
// side by side, shows runs and their details.

import * as vscode from "vscode";
import { ClientHooks, SECRET_KEY, ServerManager } from "./client";
import { apiKeyEnvName } from "./config";
import {
  candidateArgs,
  CandidateRef,
  COMMANDS,
  isActive,
  Job,
  parseCandidateArgs,
  parseShowDiff,
  ShowDiff,
  showDiffArgs,
} from "./protocol";
import { InlineReviews } from "./review/inline";
import { SideBySide } from "./review/sideBySide";
import { RunNode } from "./runs/model";
import { RunPanels } from "./runs/panel";
import { RunsView } from "./runs/view";

let manager: ServerManager | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel("Forge", { log: true });
  context.subscriptions.push(output);

  // the pieces reference each other through these late-bound hooks
  let reviews: InlineReviews | undefined;
  let sideBySide: SideBySide | undefined;
  let runs: RunsView | undefined;

  const showCandidate = async (ref: CandidateRef, diff: ShowDiff, mode?: "inline" | "sideBySide") => {
    const chosen = mode ?? (vscode.workspace.getConfiguration("forge").get<string>("diffMode") === "sideBySide" ? "sideBySide" : "inline");
    if (chosen === "sideBySide") await sideBySide?.open(ref, diff);
    else await reviews?.start(ref, diff);
  };

  const hooks: ClientHooks = {
    async executeCommand(command, args, next) {
      const ref = parseCandidateArgs(args);
      if (command === COMMANDS.showDiff && ref) {
        const result = await next(command, showDiffArgs(ref)); // texts only: shown in this extension's diff views
        const diff = parseShowDiff(result);
        if ("error" in diff) void vscode.window.showWarningMessage(`Forge: ${diff.error}`);
        else await showCandidate(ref, diff);
        return result;
      }
      if ((command === COMMANDS.accept || command === COMMANDS.reject) && ref && reviews?.isReviewing(ref.uri)) {
        await reviews.decide(command === COMMANDS.accept ? "acceptAll" : "rejectAll", ref.uri);
        return command === COMMANDS.accept ? { applied: true, message: "decided in the inline review" } : { rejected: true };
      }
      const result = await next(command, args);
      if (command === COMMANDS.optimize || command === COMMANDS.profile || command === COMMANDS.explain || command === COMMANDS.cancel ||
        command === COMMANDS.accept || command === COMMANDS.reject) {
        // a job started or stopped, or says what became of its candidate. The Runs view is not focused: a
        // run shows its own progress notification, and moving the focus would take the user's keystrokes
        runs?.kick();
      }
      return result;
    },
    onProgress: (token, value) => runs?.onProgress(token, value),
    onRunning: (running) => {
      if (running) void runs?.refresh();
      else {
        void runs?.refresh();
        void reviews?.serverStopped();
      }
    },
  };

  manager = new ServerManager(context, output, hooks);
  const server = manager;
  reviews = new InlineReviews(server);
  sideBySide = new SideBySide(server);
  runs = new RunsView(server);
  const runsView = runs;
  const review = reviews;
  const sbs = sideBySide;

  /** A job's open proposal, as the server last reported it (`forge/runs`): also for files that are closed. */
  const findProposal = (job: Job): CandidateRef | undefined => (runsView.job(job.id) ?? job).proposal ?? undefined;

  const panels = new RunPanels(server, {
    findProposal,
    review: (ref, diff, mode) => showCandidate(ref, diff, mode),
    decide: async (ref, kind) => {
      await vscode.commands.executeCommand(kind === "accept" ? COMMANDS.accept : COMMANDS.reject, ...candidateArgs(ref));
    },
  });

  context.subscriptions.push(server, review, sbs, runsView, panels);
  context.subscriptions.push(server.onDidRunCommand((command) => {
    const edits: string[] = [COMMANDS.accept, COMMANDS.reject, COMMANDS.cancel, COMMANDS.acceptModelWide, COMMANDS.rejectModelWide, COMMANDS.undoModelWide];
    if (edits.includes(command)) runsView.kick();
  }));

  // every finished optimize run says how it ended; profile/explain put their results in hover and diagnostics
  context.subscriptions.push(runsView.onDidUpdate((jobs) => void panels.updateAll(jobs)));
  runsView.onDidFinish(async (job) => {
    const where = `${job.target} (${vscode.workspace.asRelativePath(vscode.Uri.parse(job.uri), false)})`;
    if (job.status === "cancelled") {
      vscode.window.setStatusBarMessage(`forge: ${job.kind} ${where} cancelled`, 5000);
      return;
    }
    if (job.status === "failed") return; // the server has shown the error
    if (job.kind === "model-wide") { // its offer (Accept into the classes, Reject) is a lens on the entry function
      const pick = await vscode.window.showInformationMessage(`Forge: model-wide ${where}: ${job.message || job.status}`, "Details");
      if (pick === "Details") await panels.show(runsView.job(job.id) ?? job);
      return;
    }
    if (job.kind !== "optimize") {
      const look = job.kind === "hotspots" ? "see the lenses on the hot classes" : `hover the ${job.kind === "explain" ? "line" : "class"} for the numbers`;
      vscode.window.setStatusBarMessage(`forge: ${job.kind} ${where}: ${job.message || "done"} — ${look}`, 10000);
      return;
    }
    const ref = findProposal(job);
    const buttons = ref ? ["Review", "Details"] : ["Details"];
    const pick = await vscode.window.showInformationMessage(`Forge: ${where}: ${job.message || job.status}`, ...buttons);
    if (pick === "Review" && ref) await vscode.commands.executeCommand(COMMANDS.showDiff, ...candidateArgs(ref));
    else if (pick === "Details") await panels.show(runsView.job(job.id) ?? job);
  });

  const onTarget = (kind: "optimize" | "profile" | "explain" | "hotspots") => async () => {
    const editor = vscode.window.activeTextEditor;
    if (!editor) return;
    const command = COMMANDS[kind];
    const lenses = await vscode.commands.executeCommand<vscode.CodeLens[]>("vscode.executeCodeLensProvider", editor.document.uri);
    const targets = (lenses ?? []).filter((l) => l.command?.command === command && Array.isArray(l.command.arguments));
    if (targets.length === 0) {
      void vscode.window.showInformationMessage(kind === "hotspots"
        ? "Forge: no model entry in this file (a build, build_*, make_model or get_model function returning (model, args))."
        : `Forge: nothing to ${kind} in this file (no nn.Module${kind === "optimize" ? "" : " or __global__ kernel"} found).`);
      return;
    }
    const line = editor.selection.active.line;
    // the closest target above the cursor, else ask
    const above = targets.filter((l) => l.range.start.line <= line).sort((a, b) => b.range.start.line - a.range.start.line);
    let chosen = targets.length === 1 ? targets[0] : above[0];
    if (!chosen) {
      const pick = await vscode.window.showQuickPick(targets.map((l) => ({ label: String(l.command!.arguments![1]), lens: l })),
        { placeHolder: kind === "hotspots" ? "Which entry?" : `What to ${kind}?` });
      chosen = pick?.lens as vscode.CodeLens;
    }
    if (chosen?.command) await vscode.commands.executeCommand(command, ...(chosen.command.arguments ?? []));
  };

  context.subscriptions.push(
    vscode.commands.registerCommand("forge.restartServer", () => server.restart("Forge: Restart Server")),
    vscode.commands.registerCommand("forge.showLogs", () => output.show()),
    vscode.commands.registerCommand("forge.setApiKey", async () => {
      const name = apiKeyEnvName((k) => vscode.workspace.getConfiguration("forge").get(k));
      const key = await vscode.window.showInputBox({
        title: "Forge: API key",
        prompt: `Stored in VS Code's secret storage; the server gets it in ${name} only.`,
        password: true,
        ignoreFocusOut: true,
      });
      if (key === undefined) return;
      if (key.trim() === "") await context.secrets.delete(SECRET_KEY);
      else await context.secrets.store(SECRET_KEY, key.trim());
      // the secret store's change event restarts the server
      void vscode.window.showInformationMessage(key.trim() ? "Forge: API key stored; restarting the server." : "Forge: API key removed.");
    }),
    vscode.commands.registerCommand("forge.clearApiKey", async () => {
      await context.secrets.delete(SECRET_KEY);
      void vscode.window.showInformationMessage("Forge: API key removed from the secret storage.");
    }),
    vscode.commands.registerCommand("forge.installServer", async () => {
      const choice = await server.resolveInterpreter();
      const local = await server.localCheckout();
      const pick = local
        ? await vscode.window.showQuickPick([
          { label: "From PyPI", description: "pip install forge-lsp", from: { kind: "pypi" as const } },
          { label: "From this workspace", description: `pip install -e ${local}`, from: { kind: "path" as const, path: local } },
        ], { placeHolder: `Install forge-lsp into ${choice.label}` })
        : { from: { kind: "pypi" as const } };
      if (pick) server.installInTerminal(choice, pick.from);
    }),
    vscode.commands.registerCommand("forge.optimizeHere", onTarget("optimize")),
    vscode.commands.registerCommand("forge.profileHere", onTarget("profile")),
    vscode.commands.registerCommand("forge.explainHere", onTarget("explain")),
    vscode.commands.registerCommand("forge.hotspotsHere", onTarget("hotspots")),
    vscode.commands.registerCommand("forge.review.acceptHunk", (uri?: unknown, index?: unknown) => review.decide("accept", uri, index)),
    vscode.commands.registerCommand("forge.review.rejectHunk", (uri?: unknown, index?: unknown) => review.decide("reject", uri, index)),
    vscode.commands.registerCommand("forge.review.acceptAll", (uri?: unknown) => review.decide("acceptAll", uri)),
    vscode.commands.registerCommand("forge.review.rejectAll", (uri?: unknown) => review.decide("rejectAll", uri)),
    vscode.commands.registerCommand("forge.review.acceptCandidate", () => sbs.decide("accept")),
    vscode.commands.registerCommand("forge.review.rejectCandidate", () => sbs.decide("reject")),
    vscode.commands.registerCommand("forge.runs.refresh", () => runsView.refresh()),
    vscode.commands.registerCommand("forge.runs.cancel", async (node?: RunNode) => {
      if (node?.type !== "run") return;
      await server.serverCommand(COMMANDS.cancel, [node.job.id]).catch((e) => vscode.window.showErrorMessage(`Forge: ${String(e)}`));
      runsView.kick();
    }),
    vscode.commands.registerCommand("forge.runs.cancelAll", async () => {
      if (!runsView.jobs.some(isActive)) return;
      const ok = await vscode.window.showWarningMessage("Forge: cancel every running job?", { modal: true }, "Cancel all");
      if (ok) await server.serverCommand(COMMANDS.cancel, []).catch((e) => vscode.window.showErrorMessage(`Forge: ${String(e)}`));
      runsView.kick();
    }),
    vscode.commands.registerCommand("forge.runs.openDetails", (node?: RunNode) => node?.type === "run" && panels.show(runsView.job(node.job.id) ?? node.job)),
    vscode.commands.registerCommand("forge.runs.openFile", async (node?: RunNode) => {
      if (node?.type !== "run" || !node.job.uri) return;
      await vscode.window.showTextDocument(vscode.Uri.parse(node.job.uri));
    }),
  );

  await server.start();
}

export async function deactivate(): Promise<void> {
  await manager?.stop();
  manager = undefined;
}
