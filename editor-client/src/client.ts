// Starting, stopping and restarting the forge-lsp language server.

import { execFile } from "child_process";
import * as os from "os";
import * as readline from "readline";
import * as stream from "stream";
import * as vscode from "vscode";
import {
  DidChangeConfigurationNotification,
  DynamicFeature,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  NotificationHandler,
  ProgressType,
  RevealOutputChannelOn,
  ServerOptions,
  State,
  StaticFeature,
  TransportKind,
} from "vscode-languageclient/node";
import {
  configurationAnswer,
  describeEnv,
  initializationOptions,
  needsRestart,
  serverEnv,
  serverSettings,
  SettingGetter,
} from "./config";
import {
  chooseInterpreter,
  installCommand,
  InterpreterChoice,
  isForgeCheckout,
  parseProbe,
  probeArgv,
  ProbeResult,
  serverArgv,
} from "./interpreter";
import { isBuiltinProgressFeature, ProgressNotifications } from "./progress";
import { activeInterpreter, onInterpreterChange } from "./python";
import { ServerLogParser } from "./serverLog";

export const SECRET_KEY = "forge.apiKey";

/** What the rest of the extension plugs into the client (review, runs view). */
export interface ClientHooks {
  executeCommand(command: string, args: unknown[], next: (command: string, args: unknown[]) => Promise<unknown>): Promise<unknown>;
  onProgress(token: string | number, value: unknown): void;
  onRunning(running: boolean): void;
}

/**
 * A LanguageClient that shows server progress as cancellable notifications (progress.ts) instead of
 * the status-bar-only progress of vscode-languageclient, and tells the extension about every
 * `$/progress` value it handles.
 */
class ForgeLanguageClient extends LanguageClient {
  progressListener?: (token: string | number, value: unknown) => void;

  // called from the base constructor too (its built-in features): no subclass fields used here
  override registerFeature(feature: StaticFeature | DynamicFeature<unknown>): void {
    if (isBuiltinProgressFeature(feature)) return;
    super.registerFeature(feature);
  }

  override onProgress<P>(type: ProgressType<P>, token: string | number, handler: NotificationHandler<P>): vscode.Disposable {
    return super.onProgress(type, token, (value: P) => {
      try {
        this.progressListener?.(token, value);
      } catch {
        // the view must never break the progress UI
      }
      handler(value);
    });
  }
}

function lines(input: stream.Readable, each: (line: string) => void): void {
  readline.createInterface({ input, crlfDelay: Infinity, terminal: false, historySize: 0 }).on("line", each);
}

function forgeConfig(): SettingGetter {
  const cfg = vscode.workspace.getConfiguration("forge");
  return (key) => cfg.get(key);
}

export class ServerManager implements vscode.Disposable {
  client: ForgeLanguageClient | undefined;
  interpreter: InterpreterChoice | undefined;
  private readonly disposables: vscode.Disposable[] = [];
  private starting: Promise<void> | undefined;
  private restartTimer: NodeJS.Timeout | undefined;
  private readonly commandRan = new vscode.EventEmitter<string>();
  /** A `serverCommand` got its reply (the runs view refreshes after accept/reject/cancel). */
  readonly onDidRunCommand = this.commandRan.event;

  constructor(
    private readonly context: vscode.ExtensionContext,
    readonly output: vscode.LogOutputChannel,
    private readonly hooks: ClientHooks,
  ) {
    this.disposables.push(vscode.workspace.onDidChangeConfiguration((e) => this.onConfiguration(e)));
    this.disposables.push(context.secrets.onDidChange((e) => {
      if (e.key === SECRET_KEY) this.scheduleRestart("the API key changed");
    }));
    void onInterpreterChange(() => {
      if (!forgeConfig()("interpreter")) this.scheduleRestart("the Python extension's interpreter changed");
    }).then((d) => this.disposables.push(d));
  }

  get running(): boolean {
    return this.client?.state === State.Running;
  }

  private workspaceFolder(): vscode.WorkspaceFolder | undefined {
    return vscode.workspace.workspaceFolders?.[0];
  }

  async resolveInterpreter(): Promise<InterpreterChoice> {
    const folder = this.workspaceFolder();
    const get = forgeConfig();
    const setting = (get("interpreter") as string | undefined) ?? "";
    const fromExt = setting.trim() ? null : await activeInterpreter(folder?.uri);
    return chooseInterpreter({
      setting,
      pythonExtension: fromExt,
      workspaceFolder: folder?.uri.fsPath,
      home: os.homedir(),
      platform: process.platform,
    });
  }

  probe(choice: InterpreterChoice): Promise<ProbeResult> {
    const { command, args } = probeArgv(choice);
    return new Promise((resolve) => {
      execFile(command, args, { timeout: 30_000, cwd: this.workspaceFolder()?.uri.fsPath, windowsHide: true },
        (error, stdout, stderr) => {
          const spawnError = error && typeof (error as NodeJS.ErrnoException).code === "string"
            ? { code: (error as NodeJS.ErrnoException).code as string, message: error.message } : undefined;
          const code = error ? (typeof (error as { code?: unknown }).code === "number" ? (error as { code: number }).code : 1) : 0;
          resolve(parseProbe(code, String(stdout), String(stderr), spawnError));
        });
    });
  }

  start(): Promise<void> {
    if (!this.starting) {
      this.starting = this.doStart().finally(() => {
        this.starting = undefined;
      });
    }
    return this.starting;
  }

  private async doStart(): Promise<void> {
    if (this.client) return;
    const choice = await this.resolveInterpreter();
    this.interpreter = choice;
    this.output.info(`interpreter: ${choice.label}`);
    const probe = await this.probe(choice);
    if (!probe.ok) {
      this.output.error(`cannot start forge-lsp with ${choice.label}: ${probe.detail}`);
      void this.offerFix(choice, probe);
      return;
    }
    this.output.info(`forge_lsp ${probe.version} (Python ${probe.python})${probe.path ? ` at ${probe.path}` : ""}`);
    const get = forgeConfig();
    const apiKey = await this.context.secrets.get(SECRET_KEY);
    const env = serverEnv({ base: process.env, apiKey, get });
    const keyName = serverSettings(get).apiKeyEnv;
    this.output.info(`environment changes: ${describeEnv(env, process.env, [keyName]) || "none"}; ` +
      `API key: ${apiKey ? `from the secret store, in ${keyName}` : process.env[keyName] ? `inherited ${keyName}` : "none"}`);
    const argv = serverArgv(choice);
    const serverOptions: ServerOptions = {
      command: argv.command,
      args: argv.args,
      transport: TransportKind.stdio,
      options: { env, cwd: this.workspaceFolder()?.uri.fsPath },
    };
    const hooks = this.hooks;
    const clientOptions: LanguageClientOptions = {
      documentSelector: [
        { scheme: "file", language: "python" },
        { scheme: "file", language: "cuda-cpp" },
        { scheme: "untitled", language: "python" },
      ],
      outputChannel: this.output,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      // each server log line at its own level (the default logs all of stderr as errors)
      stdioOptions: {
        stdout: (input: stream.Readable, channel: vscode.LogOutputChannel) => lines(input, (line) => channel.info(line)),
        stderr: (input: stream.Readable, channel: vscode.LogOutputChannel) => {
          const parser = new ServerLogParser();
          lines(input, (raw) => {
            const { level, text } = parser.line(raw);
            channel[level](text);
          });
        },
      },
      initializationOptions: initializationOptions(get),
      middleware: {
        executeCommand: (command, args, next) =>
          hooks.executeCommand(command, args, async (c, a) => next(c, a as unknown[])),
        workspace: {
          configuration: (params, token, next) => {
            const get2 = forgeConfig();
            const answers = params.items.map((item) => configurationAnswer(item.section, get2));
            if (answers.every((a) => a !== undefined)) return answers;
            return Promise.resolve(next(params, token)).then((fromNext) => {
              if (!Array.isArray(fromNext)) return fromNext;
              return answers.map((a, i) => (a !== undefined ? a : fromNext[i]));
            });
          },
        },
      },
    };
    const client = new ForgeLanguageClient("forge", "forge-lsp", serverOptions, clientOptions);
    client.registerFeature(new ProgressNotifications(client));
    client.progressListener = (token, value) => hooks.onProgress(token, value);
    client.onDidChangeState((e) => hooks.onRunning(e.newState === State.Running));
    this.client = client;
    try {
      await client.start();
      this.output.info("forge-lsp started");
    } catch (err) {
      this.output.error(`forge-lsp failed to start: ${String(err)}`);
      this.client = undefined;
      void vscode.window.showErrorMessage(`Forge: the language server failed to start (${String(err)}).`, "Show Logs")
        .then((pick) => pick && this.output.show());
    }
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client) {
      try {
        await client.stop(5000);
      } catch (err) {
        this.output.warn(`stopping forge-lsp: ${String(err)}`);
      }
      await client.dispose().catch(() => undefined);
    }
  }

  async restart(reason = "restart requested"): Promise<void> {
    this.output.info(`restarting forge-lsp: ${reason}`);
    await this.stop();
    await this.start();
  }

  private scheduleRestart(reason: string): void {
    if (this.restartTimer) clearTimeout(this.restartTimer);
    this.restartTimer = setTimeout(() => void this.restart(reason), 300);
  }

  private onConfiguration(e: vscode.ConfigurationChangeEvent): void {
    if (!e.affectsConfiguration("forge")) return;
    if (needsRestart((key) => e.affectsConfiguration(`forge.${key}`))) {
      this.scheduleRestart("settings changed");
      return;
    }
    if (this.client && this.running) {
      // server settings: push them to the running server (no restart: runs keep going)
      void this.client.sendNotification(DidChangeConfigurationNotification.type,
        { settings: { forge: serverSettings(forgeConfig()) } });
    }
  }

  /** workspace/executeCommand on the server, bypassing the client-side command middleware. */
  async serverCommand(command: string, args: unknown[]): Promise<unknown> {
    if (!this.client || !this.running) throw new Error("the forge language server is not running");
    try {
      return await this.client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
    } finally {
      this.commandRan.fire(command);
    }
  }

  async request<R>(method: string, params?: unknown): Promise<R> {
    if (!this.client || !this.running) throw new Error("the forge language server is not running");
    return this.client.sendRequest(method, params) as Promise<R>;
  }

  private async offerFix(choice: InterpreterChoice, probe: Extract<ProbeResult, { ok: false }>): Promise<void> {
    const local = await this.localCheckout();
    const actions: string[] = [];
    if (probe.reason === "missing-module") {
      actions.push("Install forge-lsp");
      if (local) actions.push("Install from workspace");
    }
    actions.push("Set Interpreter", "Show Logs");
    const why = probe.reason === "no-interpreter"
      ? `cannot run ${choice.label}`
      : probe.reason === "missing-module" ? `forge_lsp is not importable with ${choice.label}` : `${choice.label}: ${probe.detail}`;
    const pick = await vscode.window.showErrorMessage(`Forge: ${why}.`, ...actions);
    if (pick === "Install forge-lsp") this.installInTerminal(choice, { kind: "pypi" });
    else if (pick === "Install from workspace" && local) this.installInTerminal(choice, { kind: "path", path: local });
    else if (pick === "Set Interpreter") {
      void vscode.commands.executeCommand("workbench.action.openSettings", "forge.interpreter");
    } else if (pick === "Show Logs") this.output.show();
  }

  /** A workspace folder that is a forge-lsp checkout (its pyproject.toml names the project). */
  async localCheckout(): Promise<string | undefined> {
    for (const folder of vscode.workspace.workspaceFolders ?? []) {
      try {
        const bytes = await vscode.workspace.fs.readFile(vscode.Uri.joinPath(folder.uri, "pyproject.toml"));
        if (isForgeCheckout(Buffer.from(bytes).toString("utf8"))) return folder.uri.fsPath;
      } catch {
        // no pyproject.toml here
      }
    }
    return undefined;
  }

  installInTerminal(choice: InterpreterChoice, from: { kind: "pypi" } | { kind: "path"; path: string }): void {
    const terminal = vscode.window.createTerminal({ name: "Forge: install forge-lsp" });
    terminal.show();
    terminal.sendText(installCommand(choice, from, process.platform));
    void vscode.window.showInformationMessage("Forge: when the installation has finished, restart the server.", "Restart Server")
      .then((pick) => pick && void this.restart("forge-lsp installed"));
  }

  dispose(): void {
    if (this.restartTimer) clearTimeout(this.restartTimer);
    for (const d of this.disposables) d.dispose();
    this.commandRan.dispose();
    void this.stop();
  }
}
