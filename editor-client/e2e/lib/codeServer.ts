// code-server (a real VS Code served to a browser): install a .vsix, start it on a free port of
// 127.0.0.1 with its own user-data, extensions and config, stop it (its whole process group:
// code-server starts the VS Code server, which starts the extension host, which starts forge-lsp).

import { ChildProcess, execFile, spawn } from "child_process";
import * as fs from "fs";
import * as path from "path";
import { until } from "./wait";

export interface CodeServerPaths {
  /** code-server's launcher (node_modules/.bin/code-server of the e2e install). */
  bin: string;
  /** Node 24 (code-server refuses older ones): its bin/ goes first on PATH. */
  node: string;
  userDataDir: string;
  extensionsDir: string;
  /** code-server's own config file (else it writes ~/.config/code-server/config.yaml). */
  configFile: string;
}

function pathWithNode(node: string, env: NodeJS.ProcessEnv): string {
  return [path.dirname(node), env.PATH ?? "/usr/local/bin:/usr/bin:/bin"].join(path.delimiter);
}

function commonArgs(p: CodeServerPaths): string[] {
  return ["--config", p.configFile, "--user-data-dir", p.userDataDir, "--extensions-dir", p.extensionsDir];
}

/** `code-server --install-extension VSIX` into the given dirs; resolves with its output. */
export function installExtension(p: CodeServerPaths, vsix: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(p.bin, [...commonArgs(p), "--install-extension", vsix, "--force"],
      { env: { ...process.env, PATH: pathWithNode(p.node, process.env) }, timeout: 120_000 },
      (error, stdout, stderr) => {
        const out = `${stdout}${stderr}`;
        if (error || !/successfully installed/i.test(out)) reject(new Error(`installing ${vsix} failed:\n${out}\n${error ?? ""}`));
        else resolve(out);
      });
  });
}

export class CodeServer {
  private proc: ChildProcess | undefined;
  private output = "";
  url = "";

  constructor(private readonly paths: CodeServerPaths) {}

  /** Everything code-server printed (for the artifacts). */
  get log(): string {
    return this.output;
  }

  /**
   * Start on 127.0.0.1 port 0 (the OS picks a free one: no race with a probe) and read the port back
   * from code-server's "HTTP server listening on http://127.0.0.1:PORT/" line.
   */
  async start(workspace: string, env: Record<string, string>): Promise<string> {
    const p = this.paths;
    fs.writeFileSync(p.configFile, "bind-addr: 127.0.0.1:0\nauth: none\ncert: false\n");
    const args = [
      ...commonArgs(p),
      "--auth", "none",
      "--disable-telemetry",
      "--disable-update-check",
      "--disable-workspace-trust",
      "--disable-getting-started-override",
      workspace,
    ];
    this.proc = spawn(p.bin, args, {
      env: { ...env, PATH: pathWithNode(p.node, env) },
      // own process group: stop() ends code-server and everything it started, by this group's id
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const collect = (b: Buffer) => {
      this.output += b.toString("utf8");
    };
    this.proc.stdout!.on("data", collect);
    this.proc.stderr!.on("data", collect);
    let exited: string | undefined;
    this.proc.on("exit", (code, signal) => {
      exited = `code-server exited (${code ?? signal})`;
    });
    const port = await until("code-server to listen", () => {
      if (exited) throw new Error(`${exited}:\n${this.output}`);
      return /HTTP server listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(this.output)?.[1];
    }, { timeoutMs: 60_000, intervalMs: 100, lastSeen: () => this.output.slice(-2000) });
    this.url = `http://127.0.0.1:${port}`;
    return this.url;
  }

  /** SIGKILL to the whole process group, synchronously (for process exit: nothing may outlive the test). */
  killNow(): void {
    const pid = this.proc?.pid;
    if (pid === undefined) return;
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // already gone
    }
  }

  /** SIGTERM to the process group, SIGKILL after a grace period; returns when code-server is gone. */
  async stop(graceMs = 5000): Promise<void> {
    const proc = this.proc;
    if (!proc || proc.pid === undefined || proc.exitCode !== null || proc.signalCode !== null) return;
    const gone = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
    const signalGroup = (sig: NodeJS.Signals) => {
      try {
        process.kill(-proc.pid!, sig);
      } catch {
        // already gone
      }
    };
    signalGroup("SIGTERM");
    const timer = setTimeout(() => signalGroup("SIGKILL"), graceMs);
    await gone;
    clearTimeout(timer);
    // forge-lsp and the extension host may outlive code-server's main process for a moment
    signalGroup("SIGKILL");
  }
}
