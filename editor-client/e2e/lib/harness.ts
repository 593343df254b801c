// The e2e harness: a temp workspace, user-data-dir and extensions-dir; the .vsix installed into them;
// code-server started on the workspace with the scripted model server's settings; Debian's chromium
// driven by playwright-core; screenshots, timings and logs copied to <repo>/.ci/artifacts/vscode-e2e.
//
// Inputs (environment; run.sh sets them):
//   E2E_CODE_SERVER, E2E_NODE, E2E_CHROMIUM   from setup.sh
//   FORGE_E2E_VSIX                             the extension package under test
//   FORGE_PYTHON                               the interpreter with forge-lsp (default <repo>/.venv/bin/python)
//   FORGE_E2E_ARTIFACTS                        default <repo>/.ci/artifacts/vscode-e2e
//   FORGE_E2E_KEEP=1                           keep the temp folders (printed at the end)

import * as crypto from "crypto";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import type { TestContext } from "node:test";
import { Browser, chromium, Page } from "playwright-core";
import { FakeOpenAI } from "../../test/support/fakeOpenAI";
import { CodeServer, installExtension } from "./codeServer";
import { ConsoleRecorder, logFiles } from "./logs";
import { Workbench } from "./workbench";

/** editor-client/ (this file runs as editor-client/e2e/out/e2e/lib/harness.js). */
export const CLIENT_DIR = path.resolve(__dirname, "..", "..", "..", "..");
export const REPO = path.resolve(CLIENT_DIR, "..");

function required(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (run the e2e test through editor-client/e2e/run.sh)`);
  return v;
}

/** VS Code user settings: keep the window quiet and deterministic (nothing of forge's here). */
const USER_SETTINGS = {
  "workbench.startupEditor": "none",
  "workbench.tips.enabled": false,
  "workbench.welcomePage.walkthroughs.openOnInstall": false,
  "workbench.enableExperiments": false,
  // the Chat view opens in the secondary side bar by default and takes a third of the window
  "chat.disableAIFeatures": true,
  "workbench.secondarySideBar.defaultVisibility": "hidden",
  "telemetry.telemetryLevel": "off",
  "extensions.ignoreRecommendations": true,
  "extensions.autoCheckUpdates": false,
  "extensions.autoUpdate": false,
  "update.mode": "none",
  "update.showReleaseNotes": false,
  "security.workspace.trust.enabled": false,
  // not a git repository; the git extension would only log that it found none
  "git.enabled": false,
  "editor.minimap.enabled": false,
  // quick Quick Open: no editor history entries above the file results
  "workbench.quickOpen.preserveInput": false,
  "workbench.editor.enablePreview": false,
  // what VS Code for the Web does by default anyway (desktop: "off"); the review must cope with it
  "files.autoSave": "afterDelay",
  "files.autoSaveDelay": 1000,
  "editor.hover.delay": 300,
  // the breadcrumbs of a review document show its absolute temp path: noise in the README picture
  "breadcrumbs.enabled": false,
  // calmer screenshots: no highlighted occurrences of the word under the cursor
  "editor.occurrencesHighlight": "off",
  "editor.selectionHighlight": false,
  "window.restoreWindows": "none",
};

export interface Settings {
  [key: string]: unknown;
}

export interface StepRecord {
  name: string;
  status: "passed" | "failed" | "skipped";
  seconds: number;
  failures: string[];
  screenshots: string[];
}

/** What a step body gets: soft checks (recorded, the step goes on) and extra screenshots. */
export interface StepContext {
  /** A soft assertion: records `message` when `ok` is false; the step fails at its end. */
  check(ok: boolean, message: string): boolean;
  /** Run a sub-check that may throw (a wait that times out): recorded like a failed check. */
  soft<T>(what: string, fn: () => Promise<T>): Promise<T | undefined>;
  /** A named screenshot now (NN-<name>.png). */
  shot(name: string): Promise<string>;
  note(text: string): void;
}

export class Harness {
  readonly root: string;
  readonly workspace: string;
  readonly userDataDir: string;
  readonly extensionsDir: string;
  readonly artifacts: string;
  readonly python: string;
  readonly apiKey = `sk-e2e-${crypto.randomBytes(12).toString("hex")}`;
  readonly steps: StepRecord[] = [];
  readonly timings: Array<{ phase: string; seconds: number }> = [];
  readonly notes: string[] = [];
  fake!: FakeOpenAI;
  server!: CodeServer;
  browser: Browser | undefined;
  page!: Page;
  wb!: Workbench;
  console!: ConsoleRecorder;
  private shots = 0;
  private aborted: string | undefined;
  private finished = false;

  private constructor() {
    this.root = fs.mkdtempSync(path.join(os.tmpdir(), "forge-vscode-e2e-"));
    this.workspace = path.join(this.root, "workspace");
    this.userDataDir = path.join(this.root, "user-data");
    this.extensionsDir = path.join(this.root, "extensions");
    this.artifacts = process.env.FORGE_E2E_ARTIFACTS || path.join(REPO, ".ci", "artifacts", "vscode-e2e");
    this.python = process.env.FORGE_PYTHON || path.join(REPO, ".venv", "bin", "python");
    for (const d of [this.workspace, path.join(this.userDataDir, "User"), this.extensionsDir, path.join(this.root, "forge-cache")]) {
      fs.mkdirSync(d, { recursive: true });
    }
    // what run.sh timed before this process started ("phase=seconds;...")
    for (const part of (process.env.FORGE_E2E_PRE_TIMINGS ?? "").split(";").filter(Boolean)) {
      const i = part.lastIndexOf("=");
      this.timings.push({ phase: part.slice(0, i), seconds: Number(part.slice(i + 1)) });
    }
    // a fresh artifacts folder: stale screenshots of an earlier run would mislead
    fs.rmSync(this.artifacts, { recursive: true, force: true });
    fs.mkdirSync(this.artifacts, { recursive: true });
  }

  private async timed<T>(phase: string, fn: () => Promise<T>): Promise<T> {
    const t0 = Date.now();
    try {
      return await fn();
    } finally {
      this.timings.push({ phase, seconds: (Date.now() - t0) / 1000 });
    }
  }

  /**
   * Everything up to a workbench showing the workspace. `files`: workspace-relative path -> text. `binDirs`: folders put
   * first on code-server's PATH (so on the server's): stand-ins for hardware tools.
   */
  static async start(opts: { files: Record<string, string>; settings: (baseUrl: string) => Settings; binDirs?: string[] }): Promise<Harness> {
    const h = new Harness();
    const bin = required("E2E_CODE_SERVER");
    const node = required("E2E_NODE");
    const chromiumBin = required("E2E_CHROMIUM");
    const vsix = required("FORGE_E2E_VSIX");
    if (!fs.existsSync(h.python)) throw new Error(`no Python at ${h.python} (set FORGE_PYTHON)`);

    h.fake = await new FakeOpenAI().start();
    for (const [rel, text] of Object.entries(opts.files)) {
      fs.mkdirSync(path.dirname(path.join(h.workspace, rel)), { recursive: true });
      fs.writeFileSync(path.join(h.workspace, rel), text);
    }
    h.writeWorkspaceSettings(opts.settings(h.fake.baseUrl));
    fs.writeFileSync(path.join(h.userDataDir, "User", "settings.json"), JSON.stringify(USER_SETTINGS, null, 2));

    const paths = { bin, node, userDataDir: h.userDataDir, extensionsDir: h.extensionsDir, configFile: path.join(h.root, "code-server.yaml") };
    await h.timed("install the .vsix into code-server", () => installExtension(paths, vsix));
    h.server = new CodeServer(paths);
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) {
      // nothing of an outer VS Code / Electron session may leak into this one
      if (v !== undefined && !/^(VSCODE_|ELECTRON_)/.test(k)) env[k] = v;
    }
    Object.assign(env, {
      // the server reads the key from its environment (forge.apiKeyEnv); it inherits code-server's
      OPENAI_API_KEY: h.apiKey,
      // one intra-op thread: a loaded 2-core machine wakes a thread pool slowly (timings get noisy)
      OMP_NUM_THREADS: "1",
      FORGE_CACHE_DIR: path.join(h.root, "forge-cache"),
      // the extension host (so the server) gets this environment as it is: without it, VS Code's server merges in a
      // login shell's environment, whose /etc/profile resets PATH (and would drop `binDirs`)
      VSCODE_CLI: "1",
    });
    if (opts.binDirs?.length) env.PATH = [...opts.binDirs, env.PATH ?? "/usr/local/bin:/usr/bin:/bin"].join(path.delimiter);
    // whatever happens (a test timeout, Ctrl+C), code-server's process group goes and the logs are kept
    process.once("exit", () => h.emergencyFinish());
    for (const sig of ["SIGINT", "SIGTERM"] as const) {
      process.once(sig, () => {
        h.emergencyFinish();
        process.exit(130);
      });
    }
    const url = await h.timed("start code-server", () => h.server.start(h.workspace, env));

    await h.timed("launch chromium and load the workbench", async () => {
      h.browser = await chromium.launch({
        executablePath: chromiumBin,
        args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
          "--disable-component-update", "--disable-sync", "--no-first-run", "--no-default-browser-check"],
      });
      const context = await h.browser.newContext({ viewport: { width: 1440, height: 960 } });
      // no Playwright action may wait forever (its default): a stuck click fails its step instead
      context.setDefaultTimeout(30_000);
      h.page = await context.newPage();
      h.console = new ConsoleRecorder(h.page);
      await Workbench.install(h.page);
      h.wb = new Workbench(h.page);
      await h.page.goto(`${url}/?folder=${encodeURIComponent(h.workspace)}`);
      await h.wb.waitReady();
    });
    return h;
  }

  writeWorkspaceSettings(settings: Settings): void {
    fs.mkdirSync(path.join(this.workspace, ".vscode"), { recursive: true });
    fs.writeFileSync(path.join(this.workspace, ".vscode", "settings.json"), JSON.stringify(settings, null, 2));
  }

  readWorkspaceFile(rel: string): string {
    return fs.readFileSync(path.join(this.workspace, rel), "utf8");
  }

  writeWorkspaceFile(rel: string, text: string): void {
    fs.writeFileSync(path.join(this.workspace, rel), text);
  }

  async screenshot(name: string): Promise<string> {
    const file = path.join(this.artifacts, `${String(++this.shots).padStart(2, "0")}-${name}.png`);
    await this.page.screenshot({ path: file }).catch((e) => this.notes.push(`screenshot ${name} failed: ${e}`));
    return file;
  }

  /**
   * One scenario step as a node:test subtest: timed, screenshot at its end (pass or fail), soft
   * checks collected and reported together. A failed `critical` step skips the rest;
   * `skip` (a reason) skips this one.
   */
  async step(t: TestContext, name: string, body: (s: StepContext) => Promise<void>, opts: { critical?: boolean; skip?: string } = {}): Promise<void> {
    const record: StepRecord = { name, status: "passed", seconds: 0, failures: [], screenshots: [] };
    this.steps.push(record);
    const skip = this.aborted ?? opts.skip;
    if (skip) {
      record.status = "skipped";
      this.notes.push(`${name}: skipped: ${skip}`);
      await t.test(name, { skip }, () => undefined);
      return;
    }
    const ctx: StepContext = {
      check: (ok, message) => {
        if (!ok) record.failures.push(message);
        return ok;
      },
      soft: async (what, fn) => {
        try {
          return await fn();
        } catch (err) {
          record.failures.push(`${what}: ${err instanceof Error ? err.message : String(err)}`);
          return undefined;
        }
      },
      shot: async (shotName) => {
        const f = await this.screenshot(shotName);
        record.screenshots.push(path.relative(REPO, f));
        return f;
      },
      note: (text) => this.notes.push(`${name}: ${text}`),
    };
    await t.test(name, async () => {
      const t0 = Date.now();
      let thrown: unknown;
      try {
        await body(ctx);
      } catch (err) {
        thrown = err;
        record.failures.push(`(stopped) ${err instanceof Error ? err.message : String(err)}`);
      } finally {
        record.seconds = (Date.now() - t0) / 1000;
        await ctx.shot(name);
      }
      if (record.failures.length) {
        record.status = "failed";
        // what the user was told meanwhile often says why (a warning from the extension, an error)
        const shown = await this.wb.seenNotifications(t0).catch(() => []);
        if (shown.length) record.failures.push(`notifications shown during the step: ${JSON.stringify(shown.map((n) => n.message))}`);
        if (opts.critical) this.aborted = `the critical step "${name}" failed`;
        await this.recover();
        const err = new Error(`${name}: ${record.failures.length} problem(s):\n- ${record.failures.join("\n- ")}\n` +
          `  screenshots: ${record.screenshots.join(", ")}`);
        if (thrown instanceof Error && thrown.stack) err.stack = `${err.message}\n${thrown.stack.split("\n").slice(1).join("\n")}`;
        throw err;
      }
    });
  }

  /** After a failed step: close menus, quick inputs and hovers so the next step starts from a calm window. */
  private async recover(): Promise<void> {
    try {
      for (let i = 0; i < 2; i++) await this.page.keyboard.press("Escape");
      await this.wb.moveMouseAway();
    } catch {
      // the page is gone: the next step will say so
    }
  }

  /** Stop everything, copy the logs and write the summary (pass or fail). */
  async finish(): Promise<void> {
    if (this.finished) return;
    await this.timed("stop browser and code-server", async () => {
      await this.browser?.close().catch(() => undefined);
      await this.server?.stop().catch(() => undefined);
      await this.fake?.close().catch(() => undefined);
    });
    this.writeArtifacts();
  }

  /** On process exit without finish() (the test timed out or was interrupted): synchronous cleanup. */
  private emergencyFinish(): void {
    if (this.finished) return;
    this.server?.killNow();
    this.notes.push("the test did not finish normally (timeout or interrupt): code-server was killed");
    try {
      this.writeArtifacts();
    } catch {
      // best effort
    }
  }

  private writeArtifacts(): void {
    this.finished = true;
    const logsDir = path.join(this.artifacts, "logs");
    fs.mkdirSync(logsDir, { recursive: true });
    for (const f of logFiles(this.userDataDir).all) {
      const rel = path.relative(path.join(this.userDataDir, "logs"), f);
      fs.mkdirSync(path.dirname(path.join(logsDir, rel)), { recursive: true });
      fs.copyFileSync(f, path.join(logsDir, rel));
    }
    fs.writeFileSync(path.join(logsDir, "code-server.log"), this.server?.log ?? "");
    fs.writeFileSync(path.join(logsDir, "browser-console.log"), (this.console?.all ?? []).join("\n") + "\n");
    fs.writeFileSync(path.join(logsDir, "model-requests.json"), JSON.stringify(this.fake?.requests.map((r) => ({
      method: r.method, path: r.path, body: r.body,
    })) ?? [], null, 2));
    const summary = this.summary();
    fs.writeFileSync(path.join(this.artifacts, "summary.md"), summary);
    fs.writeFileSync(path.join(this.artifacts, "summary.json"), JSON.stringify({ timings: this.timings, steps: this.steps, notes: this.notes }, null, 2));
    process.stdout.write(`\n${summary}\n`);
    if (process.env.FORGE_E2E_KEEP === "1") process.stdout.write(`kept: ${this.root}\n`);
    else fs.rmSync(this.root, { recursive: true, force: true });
  }

  summary(): string {
    const lines = ["# forge-lsp in a real VS Code: e2e summary", "", "| phase / step | result | seconds |", "|---|---|---|"];
    for (const t of this.timings) lines.push(`| ${t.phase} | | ${t.seconds.toFixed(1)} |`);
    for (const s of this.steps) lines.push(`| ${s.name} | ${s.status} | ${s.seconds.toFixed(1)} |`);
    for (const s of this.steps.filter((x) => x.failures.length)) {
      lines.push("", `## ${s.name}: ${s.status}`, ...s.failures.map((f) => `- ${f.replace(/\n/g, "\n  ")}`),
        `- screenshots: ${s.screenshots.join(", ")}`);
    }
    if (this.notes.length) lines.push("", "## notes", ...this.notes.map((n) => `- ${n}`));
    return lines.join("\n") + "\n";
  }
}
