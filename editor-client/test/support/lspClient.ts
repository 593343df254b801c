// A minimal LSP client over stdio for the wire tests: the real forge-lsp server in a subprocess,
// vscode-jsonrpc for the protocol, and an in-memory editor (documents with versions) that applies
// the server's workspace edits like VS Code's client does.

import { ChildProcess, spawn, spawnSync } from "child_process";
import * as fs from "fs";
import * as path from "path";
import { fileURLToPath } from "url";
import { createMessageConnection, MessageConnection, StreamMessageReader, StreamMessageWriter } from "vscode-jsonrpc/node";

export interface Position {
  line: number;
  character: number;
}
export interface Range {
  start: Position;
  end: Position;
}
export interface TextEdit {
  range: Range;
  newText: string;
}

/** The Python that runs the server: $FORGE_PYTHON, else the repository's .venv, else python3. */
export function serverPython(): string {
  if (process.env.FORGE_PYTHON) return process.env.FORGE_PYTHON;
  const venv = path.resolve(__dirname, "..", "..", "..", "..", ".venv", "bin", "python");
  return fs.existsSync(venv) ? venv : "python3";
}

/** Why the server cannot run with this Python, or null when forge_lsp imports. */
export function cannotRun(python: string): string | null {
  const r = spawnSync(python, ["-c", "import forge_lsp.server"], { encoding: "utf8", timeout: 60_000 });
  if (r.error) return `${python}: ${r.error.message}`;
  if (r.status !== 0) return `${python} cannot import forge_lsp.server: ${(r.stderr || "").trim().split("\n").pop()}`;
  return null;
}

export function offsetAt(text: string, pos: Position): number {
  let line = 0;
  let i = 0;
  while (line < pos.line && i < text.length) {
    const nl = text.indexOf("\n", i);
    if (nl < 0) {
      i = text.length;
      break;
    }
    i = nl + 1;
    line++;
  }
  return Math.min(i + pos.character, text.length);
}

export function positionAt(text: string, offset: number): Position {
  const before = text.slice(0, offset);
  const line = before.split("\n").length - 1;
  return { line, character: offset - (before.lastIndexOf("\n") + 1) };
}

/** Apply LSP text edits (all relative to the same text) like an editor does. */
export function applyTextEdits(text: string, edits: TextEdit[]): string {
  const withOffsets = edits.map((e) => ({ a: offsetAt(text, e.range.start), b: offsetAt(text, e.range.end), t: e.newText }));
  withOffsets.sort((x, y) => y.a - x.a);
  let out = text;
  for (const e of withOffsets) out = out.slice(0, e.a) + e.t + out.slice(e.b);
  return out;
}

export interface Doc {
  uri: string;
  text: string;
  version: number;
}

export type ApplyEditHandler = (params: any) => Promise<{ applied: boolean; failureReason?: string }>;

export class TestClient {
  readonly proc: ChildProcess;
  readonly conn: MessageConnection;
  readonly docs = new Map<string, Doc>();
  readonly diagnostics = new Map<string, any[]>();
  readonly progress = new Map<string, any[]>();
  readonly messages: Array<{ type: number; message: string }> = [];
  readonly configurationRequests: any[] = [];
  readonly sentInitialize: any[] = [];
  stderr = "";
  /** Replace to intercept workspace/applyEdit (default: apply with the version check VS Code's client does). */
  applyEdit: ApplyEditHandler = (params) => this.defaultApplyEdit(params);
  configuration: (section: string | undefined) => unknown = () => null;

  constructor(python: string, env: Record<string, string>, cwd: string) {
    this.proc = spawn(python, ["-m", "forge_lsp.server"], { env, cwd, stdio: ["pipe", "pipe", "pipe"] });
    this.proc.stderr!.on("data", (d: Buffer) => {
      this.stderr += d.toString("utf8");
      if (this.stderr.length > 200_000) this.stderr = this.stderr.slice(-100_000);
    });
    this.conn = createMessageConnection(new StreamMessageReader(this.proc.stdout!), new StreamMessageWriter(this.proc.stdin!));
    this.conn.onRequest("workspace/applyEdit", (params: any) => this.applyEdit(params));
    this.conn.onRequest("client/registerCapability", () => null);
    this.conn.onRequest("client/unregisterCapability", () => null);
    this.conn.onRequest("workspace/codeLens/refresh", () => null);
    this.conn.onRequest("window/workDoneProgress/create", (p: any) => {
      this.progress.set(String(p.token), this.progress.get(String(p.token)) ?? []);
      return null;
    });
    this.conn.onRequest("workspace/configuration", (p: any) => {
      this.configurationRequests.push(p);
      return (p.items ?? []).map((item: any) => this.configuration(item.section));
    });
    this.conn.onRequest("window/showMessageRequest", () => null);
    this.conn.onNotification("window/showMessage", (p: any) => {
      this.messages.push(p);
    });
    this.conn.onNotification("window/logMessage", (p: any) => {
      this.messages.push(p);
    });
    this.conn.onNotification("textDocument/publishDiagnostics", (p: any) => {
      this.diagnostics.set(p.uri, p.diagnostics);
    });
    this.conn.onNotification("$/progress", (p: any) => {
      const list = this.progress.get(String(p.token)) ?? [];
      list.push(p.value);
      this.progress.set(String(p.token), list);
    });
    this.conn.listen();
  }

  async initialize(rootUri: string, initializationOptions: unknown): Promise<any> {
    const params = {
      processId: process.pid,
      rootUri,
      workspaceFolders: [{ uri: rootUri, name: "ws" }],
      initializationOptions,
      capabilities: {
        window: { workDoneProgress: true, showMessage: {} },
        workspace: {
          applyEdit: true,
          configuration: true,
          workspaceFolders: true,
          workspaceEdit: { documentChanges: true, changeAnnotationSupport: { groupsOnLabel: true } },
          codeLens: { refreshSupport: true },
          didChangeWatchedFiles: { dynamicRegistration: true },
          executeCommand: { dynamicRegistration: true },
        },
        textDocument: {
          synchronization: { dynamicRegistration: true, didSave: true },
          codeLens: { dynamicRegistration: true },
          hover: { contentFormat: ["markdown", "plaintext"] },
          publishDiagnostics: { versionSupport: true },
        },
      },
    };
    this.sentInitialize.push(params);
    const result = await this.conn.sendRequest("initialize", params);
    await this.conn.sendNotification("initialized", {});
    return result;
  }

  async open(filePath: string, languageId = "python"): Promise<Doc> {
    const uri = pathToUri(filePath);
    const text = fs.readFileSync(filePath, "utf8");
    const doc = { uri, text, version: 1 };
    this.docs.set(uri, doc);
    await this.conn.sendNotification("textDocument/didOpen", { textDocument: { uri, languageId, version: 1, text } });
    return doc;
  }

  /** An edit made in the editor: bump the version, tell the server (unless held back). */
  async edit(uri: string, edits: TextEdit[], send = true): Promise<void> {
    const doc = this.docs.get(uri)!;
    const before = doc.text;
    doc.text = applyTextEdits(doc.text, edits);
    doc.version++;
    if (send) {
      // incremental changes, applied in order: last edit first so earlier ranges stay valid
      const sorted = [...edits].sort((x, y) => offsetAt(before, y.range.start) - offsetAt(before, x.range.start));
      await this.conn.sendNotification("textDocument/didChange", {
        textDocument: { uri, version: doc.version },
        contentChanges: sorted.map((e) => ({ range: e.range, text: e.newText })),
      });
    }
  }

  /** The whole current text at the current version (what the extension's resync sends). */
  async resync(uri: string): Promise<void> {
    const doc = this.docs.get(uri)!;
    await this.conn.sendNotification("textDocument/didChange", {
      textDocument: { uri, version: doc.version },
      contentChanges: [{ text: doc.text }],
    });
  }

  async defaultApplyEdit(params: any): Promise<{ applied: boolean; failureReason?: string }> {
    for (const change of params.edit.documentChanges ?? []) {
      const doc = this.docs.get(change.textDocument.uri);
      if (!doc) return { applied: false, failureReason: "document not open" };
      if (change.textDocument.version !== null && change.textDocument.version !== doc.version) {
        return { applied: false, failureReason: "stale version" };
      }
    }
    for (const change of params.edit.documentChanges ?? []) await this.edit(change.textDocument.uri, change.edits);
    return { applied: true };
  }

  command(command: string, args: unknown[]): Promise<any> {
    return this.conn.sendRequest("workspace/executeCommand", { command, arguments: args });
  }

  request(method: string, params: unknown): Promise<any> {
    return this.conn.sendRequest(method, params);
  }

  codeLenses(uri: string): Promise<any[]> {
    return this.conn.sendRequest("textDocument/codeLens", { textDocument: { uri } }) as Promise<any[]>;
  }

  async shutdown(): Promise<void> {
    try {
      await Promise.race([this.conn.sendRequest("shutdown"), sleep(5000)]);
      await this.conn.sendNotification("exit");
    } catch {
      // the server is gone already
    }
    await Promise.race([new Promise((r) => this.proc.once("exit", r)), sleep(5000)]);
    if (this.proc.exitCode === null) this.proc.kill("SIGKILL");
    this.conn.dispose();
  }
}

export function pathToUri(p: string): string {
  return "file://" + p.split(path.sep).map(encodeURIComponent).join("/");
}

export function uriToPath(uri: string): string {
  return fileURLToPath(uri);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export async function until<T>(fn: () => T | undefined | null | false, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}
