// The failure policy's inputs: error-level lines of the extension host log, of the VS Code server's
// log and of the Forge output channel's log file (all written by VS Code under <user-data-dir>/logs/),
// and the browser's console errors and uncaught page errors. Only demonstrable code-server/VS Code noise, unrelated to forge,
// is allowed (ALLOWLIST: each entry says why).

import * as fs from "fs";
import * as path from "path";
import type { ConsoleMessage, Page } from "playwright-core";

export type Source = "console" | "exthost" | "server" | "forge";

export interface Problem {
  source: Source;
  /** The file (log sources) or "browser". */
  where: string;
  text: string;
}

interface Allowed {
  source: Source;
  match: RegExp;
  why: string;
}

/**
 * Noise from code-server / VS Code itself on a machine without internet. Nothing that mentions forge
 * may be listed here.
 */
export const ALLOWLIST: Allowed[] = [
  {
    source: "console",
    // code-server does not ship Microsoft's closed-source "vsda" module (used to sign requests to
    // Microsoft services); the web workbench asks for it at startup and gets 404s.
    match: /Failed to load resource: the server responded with a status of 404 .*@ .*\/static\/node_modules\/vsda\/rust\/web\/vsda(_bg\.wasm|\.js)$/,
    why: "code-server does not ship the proprietary vsda module the workbench probes for",
  },
  {
    source: "console",
    // the Extensions view / extension-update machinery queries the configured gallery (Open VSX
    // for code-server) even with updates and recommendations off; no internet here: DNS fails.
    match: /Failed to load resource: net::ERR_NAME_NOT_RESOLVED @ https:\/\/open-vsx\.org\//,
    why: "the extension gallery (open-vsx.org) cannot be reached from a machine without internet",
  },
  {
    source: "console",
    // ... and the same failure, logged by the workbench's gallery service with its stack
    match: /^%c\s+ERR color: #f33 Failed: getaddrinfo ENOTFOUND open-vsx\.org\b[\s\S]*queryGalleryExtensions/,
    why: "the extension gallery (open-vsx.org) cannot be reached from a machine without internet",
  },
  {
    source: "console",
    // at start-up the workbench asks for GitHub sessions (its account and policy services) and gives the built-in
    // GitHub authentication extension 5 s to register; on a loaded machine it can take longer. Seen before the
    // forge extension was activated; forge uses no authentication provider.
    match: /^%c\s+ERR color: #f33 Error: Timed out waiting for authentication provider 'github' to register\.\s+at \S+\.tryActivateProvider [\s\S]*getSessions/,
    why: "VS Code's start-up wait for its built-in GitHub authentication provider timed out (a loaded machine)",
  },
  {
    source: "server",
    // ... and once more by the VS Code server process (remoteagent.log), which makes the request
    match: /#\d+: https:\/\/open-vsx\.org\/vscode\/gallery\/\S+ - error POST getaddrinfo ENOTFOUND open-vsx\.org$/,
    why: "the extension gallery (open-vsx.org) cannot be reached from a machine without internet",
  },
];

export function allowedBy(p: Problem): Allowed | undefined {
  if (/forge/i.test(p.text) && !/open-vsx\.org/.test(p.text)) return undefined; // never hide anything of ours
  return ALLOWLIST.find((a) => a.source === p.source && a.match.test(p.text));
}

/** Browser console errors and page errors, recorded from the moment the page exists. */
export class ConsoleRecorder {
  readonly problems: Problem[] = [];
  readonly all: string[] = [];

  constructor(page: Page) {
    page.on("console", (m: ConsoleMessage) => {
      const loc = m.location();
      const text = `${m.text()}${loc.url ? ` @ ${loc.url}` : ""}`;
      this.all.push(`[${new Date().toISOString()}] ${m.type()}: ${text}`);
      if (m.type() === "error") this.problems.push({ source: "console", where: "browser console", text });
    });
    page.on("pageerror", (e) => {
      const text = `${e.name}: ${e.message}\n${e.stack ?? ""}`.trim();
      this.all.push(`[${new Date().toISOString()}] pageerror: ${text}`);
      this.problems.push({ source: "console", where: "browser pageerror", text });
    });
  }
}

function walk(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...walk(p));
    else if (e.isFile()) out.push(p);
  }
  return out;
}

export interface LogFiles {
  /** The extension host's own log: <logs>/<session>/exthostN/remoteexthost.log (code-server), exthost.log (desktop). */
  exthost: string[];
  /** The VS Code server process (code-server's remote agent): <logs>/<session>/remoteagent.log. */
  server: string[];
  /** The Forge output channel (a LogOutputChannel): <logs>/<session>/exthostN/forge-lsp.forge-lsp/Forge.log. */
  forge: string[];
  all: string[];
}

export function logFiles(userDataDir: string): LogFiles {
  const all = walk(path.join(userDataDir, "logs"));
  const inExthost = (f: string) => f.split(path.sep).some((part) => /^exthost\d*$/.test(part));
  return {
    exthost: all.filter((f) => inExthost(f) && /^(remote)?exthost\.log$/.test(path.basename(f))),
    server: all.filter((f) => path.basename(f) === "remoteagent.log"),
    forge: all.filter((f) => inExthost(f) && /forge/i.test(path.basename(path.dirname(f))) && /Forge.*\.log$/.test(path.basename(f))),
    all,
  };
}

const LOG_LINE = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \[(\w+)\]/;

/** The `[error]` entries of a VS Code log file, each with its continuation lines (stacks, multi-line text). */
export function errorEntries(file: string): string[] {
  const entries: string[] = [];
  let current: string[] | null = null;
  for (const line of fs.readFileSync(file, "utf8").split(/\r?\n/)) {
    const m = LOG_LINE.exec(line);
    if (m) {
      if (current) entries.push(current.join("\n"));
      current = m[1] === "error" ? [line] : null;
    } else if (current && line.trim()) {
      current.push(line);
    }
  }
  if (current) entries.push(current.join("\n"));
  return entries;
}

/** Server log lines (Python logging: "... INFO name: msg") that VS Code's channel tagged `[error]`. */
export function serverInfoAsErrors(forgeEntries: string[]): string[] {
  return forgeEntries.filter((e) => /\[error\]\s.*\b(DEBUG|INFO)\b\s+[\w.]+:/.test(e.split("\n")[0]));
}

export interface PolicyResult {
  problems: Problem[];
  allowed: Array<Problem & { why: string }>;
}

/** Every error-level line of the logs and the console, split into problems and allowed noise. */
export function applyPolicy(userDataDir: string, consoleProblems: Problem[]): PolicyResult {
  const files = logFiles(userDataDir);
  const found: Problem[] = [...consoleProblems];
  for (const f of files.exthost) for (const e of errorEntries(f)) found.push({ source: "exthost", where: f, text: e });
  for (const f of files.server) for (const e of errorEntries(f)) found.push({ source: "server", where: f, text: e });
  for (const f of files.forge) for (const e of errorEntries(f)) found.push({ source: "forge", where: f, text: e });
  const problems: Problem[] = [];
  const allowed: Array<Problem & { why: string }> = [];
  for (const p of found) {
    const a = allowedBy(p);
    if (a) allowed.push({ ...p, why: a.why });
    else problems.push(p);
  }
  return { problems, allowed };
}

export function formatProblems(problems: Problem[], max = 40): string {
  const shown = problems.slice(0, max).map((p) => `  [${p.source}] ${path.basename(p.where)}: ${p.text.slice(0, 1500).replace(/\n/g, "\n      ")}`);
  const more = problems.length > max ? `\n  … and ${problems.length - max} more` : "";
  return shown.join("\n") + more;
}
