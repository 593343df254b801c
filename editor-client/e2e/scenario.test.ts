// forge-lsp in a REAL VS Code (code-server in headless chromium): the acceptance scenario,
// one test, steps in order. Run it with `npm run e2e` (e2e/run.sh). Screenshots, logs, timings:
// <repo>/.ci/artifacts/vscode-e2e/.
//
// Each step is a subtest: it records soft checks (the step goes on and reports every problem it
// sees) and fails at its end; the next step still runs, from whatever state the window is in, so
// one run reports every broken step. The model is scripted (test/support/fakeOpenAI.ts): one coder
// reply per optimize run (search "linear", 1 round, no offline seeds, no profiling).

import { test } from "node:test";
import * as assert from "node:assert/strict";
import { execFileSync } from "child_process";
import * as fs from "fs";
import * as path from "path";
import { Harness, REPO, StepContext } from "./lib/harness";
import { applyPolicy, formatProblems, logFiles, serverInfoAsErrors, errorEntries } from "./lib/logs";
import { delay, until } from "./lib/wait";

// =====================================================================================================
// Every UI string the scenario expects, in one place (adjust here when the extension's texts change).
// =====================================================================================================
const UI = {
  /** Code lenses the server puts over an nn.Module class. */
  lens: {
    optimize: "Optimize Model",
    profile: "Profile",
    explain: "Explain bottleneck",
    /** The server's lenses on a class with an open proposal. */
    showDiff: /^forge: .*faster candidate — Show diff$/,
    reject: "Reject",
  },
  /** Code action (Ctrl+. on the class line). */
  codeActionOptimize: "Optimize `Model`",
  /** Messages that must never show: the language client's crash/restart notices, a failed start. */
  crashed: /crash|got closed|failed to start|cannot start forge-lsp|is not importable/i,
  /** The Forge channel's line once the client is running. */
  serverStarted: /forge-lsp started/,
  /** A server log line (its stderr) in the Forge channel: proof that the log checks see the server's lines. */
  serverJobLine: /\[info\] .*job optimize-\d+ started/,
  serverJobEndLine: /\[info\] .*job optimize-\d+ (done|failed) after [\d.]+ s/,
  /** Warnings about forge's own folder (the server must not watch what it writes). */
  forgeFolderWarning: /\[warning\].*\.forge/,
  /** The progress notification of an optimize run: its title, and its cancel button. */
  progressTitle: /optimize Model/i,
  cancelButton: "Cancel",
  /** The notification at the end of an optimize run that found a verified faster candidate. */
  candidateFound: /faster candidate/i,
  /** A best candidate's speedup, said one way everywhere: the final re-timing, then the search's. */
  speedupLabel: /\d+\.\d\d× \(final re-timing(?:; search \d+\.\d\d×)?\)/,
  /** The end of any optimize run names the module and its file. */
  runEnded: /Model \(softmax_mod\.py\):/,
  /** A run without a model: its progress names the phase, and says nothing of rounds. */
  offlineProgress: /offline candidates/,
  roundZero: /round 0\//,
  offlineOutcome: /faster candidate found|no faster candidate, nothing written: no offline candidate beat the reference/,
  candidateButtons: ["Review", "Details"],
  /** The inline review's lenses (header lens texts: see src/review/inline.ts). */
  review: {
    acceptAll: "Accept all",
    rejectAll: "Reject all",
    acceptHunk: "✓ Accept",
    rejectHunk: "✗ Reject",
    header: /candidate · \d+ pending/,
  },
  /** Status-bar text while an inline review is open. */
  reviewingStatus: /reviewing/i,
  accepted: /accepted/i,
  rejected: /rejected/i,
  /** The side-by-side review: the diff editor's tab title, and the editor-title action that rejects. */
  sideBySideTab: /↔ forge/,
  rejectCandidateAction: "Reject Candidate",
  /** The activity-bar container and its view. */
  container: "Forge",
  runsView: "Runs",
  /** How a run's row label starts (kind and target; the file name may follow). */
  runLabel: { optimize: "optimize Model", explain: "explain Model" },
  /** Runs view: the description of a run that still offers its candidate; a cancelled run; group titles. */
  runOffersCandidate: /faster candidate found/i,
  runCancelled: /cancelled/i,
  runningGroup: /^Running/,
  /** Run Details webview. */
  details: {
    reviewInline: "Review inline",
    oneCandidate: /\b1 candidate\b/,
    pluralBug: /\b1 candidates\b/,
    fileUri: /file:\/\//,
    /** Where the candidates part of the page starts (the job's status line above it already has labels). */
    candidatesSection: /^Run \S+$/m,
    finalRetiming: /final re-timing/i,
    search: /\bsearch\b/i,
  },
  /** The full report (forge report) that Run Details opens in a webview of its own. */
  report: {
    button: "Open the full report",
    /** Its tab (aria-label: the title, then ", Editor Group N" when there are several groups). */
    tab: /^Report (\S+?)(?:,|$)/,
    /** What the browser says when a Content-Security-Policy refuses something (a script, a style, a load). */
    cspViolation: /Content[- ]Security[- ]Policy/i,
  },
  /** The model-wide walk: hot spots, then the model-wide run on the entry, its offer, its undo. */
  modelWide: {
    findHotSpots: "forge: Find hot spots",
    hotSpotsDone: /forge: hotspots build \(slownet\.py\)/,
    hotClass: /forge: \d+\.\d% of model time/,
    optimize: "forge: Optimize model-wide",
    ended: /Forge: model-wide build \(slownet\.py\): .*× end to end \(99% CI .*Accept into SlowBlock/,
    accept: /^forge: model-wide .*× end to end .* — Accept into SlowBlock$/,
    undo: "forge: Undo model-wide accept (SlowBlock)",
    rewritten: "forge: begin optimized SlowBlock",
  },
  /** Hover over `class Model` after Explain: forge's heading, numbers, and how each was measured. */
  hover: {
    title: /forge: Model/,
    /** A measured quantity: a time or a speedup (not the "1 s ago" of a heading). */
    number: /\d+(?:\.\d+)?\s*(?:µs|us|ms|×)/,
    measuredBy: /final re-timing|\bsearch\b|wall[- ]?(?:clock|time)|cuda events?|cuda graphs?|ncu|nsight|cpu timer|perf_counter|timed (?:with|by|on)|measured (?:with|by|on)/i,
  },
  /** Explain of the load_inline module, from the profile recorded on the GPU machine. */
  gpuExplain: {
    runLabel: "explain GatherHalf",
    title: /forge: GatherHalf/,
    settingsTaken: /settings changed:.*device='cuda:0'/,
    /** The hover's time: of which kernels, measured how and on which GPU. */
    measured: /(\d+(?:\.\d+)?) (µs|ms) per call \(1 kernel of one call under Nsight Compute on (.+?), summed\)/,
    roofline: /roofline: \d+% of the roof \(\w+-bound, against the \w+ peaks of the /,
    hottest: (line: number) => `hottest line here: line ${line},`,
    /** A finding's diagnostic on a line: what was measured there. */
    lineFinding: /% of stalls here/,
  },
};

// =====================================================================================================
// The workspace: the module (a deliberately slow row-by-row softmax) and the scripted candidate.
// =====================================================================================================
const MODULE_FILE = "softmax_mod.py";
const TASK = fs.readFileSync(path.join(REPO, "tests", "fixtures", "slow_softmax.py"), "utf8");
const CLASS_LINE_TEXT = "class Model(nn.Module)";
const CLASS_LINE = TASK.split("\n").findIndex((l) => l.startsWith(CLASS_LINE_TEXT)) + 1;
/** The original forward's body (one row at a time): kept by the rewrite in _ModelReference (once). */
const SLOW_LINE = "torch.stack([torch.softmax(row, dim=0) for row in x])";
/** Vectorized: faster than the row-at-a-time reference on the CPU, so a run ends with a proposal. */
const FAST = `
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
`;
/** What the accepted rewrite must contain (forge_lsp/engine/rewrite.py), each exactly once. */
const REWRITE_ONCE = [
  "class _ModelReference(nn.Module)",
  "class Model(_ModelReference)",
  "# --- forge: begin optimized Model",
  "# --- forge: end optimized Model ---",
  SLOW_LINE,
  "torch.softmax(x, dim=1)",
  "def get_inputs():",
  "def get_init_inputs():",
];

/** A model split over two files, as users write them: the slow block in its own module, the entry beside it. */
const BLOCKS_FILE = "blocks.py";
const BLOCKS = `import torch
import torch.nn as nn


class SlowBlock(nn.Module):
    """A projection, then a softmax over each row in a Python loop: slow on purpose."""

    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        h = self.proj(x)
        rows = h.reshape(-1, h.shape[-1])
        return torch.stack([torch.softmax(r, dim=0) for r in rows]).reshape(h.shape)
`;
const NET_FILE = "slownet.py";
const NET = `import torch
import torch.nn as nn

from blocks import SlowBlock


class Net(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.embed = nn.Linear(8, dim)
        self.blocks = nn.ModuleList([SlowBlock(dim) for _ in range(2)])
        self.head = nn.Linear(dim, 4)

    def forward(self, x):
        h = self.embed(x)
        for b in self.blocks:
            h = b(h)
        return self.head(h)


def build(batch=32):
    torch.manual_seed(0)
    return Net().eval(), (torch.randn(batch, 128, 8),)
`;
/** The model's answer for the extracted task (read when the request comes): its source plus a subclass. */
const SUBCLASS = `

class ModelNew(Model):
    def forward(self, x):
        return torch.softmax(self.proj(x), dim=-1)
`;
/** Runs the workspace's model twice, as written and with FORGE_DISABLE=1: which blocks ran forge's answer, and
 * how far apart the two outputs are. */
const PROBE = `
import json, os, subprocess, sys
run = """
import sys, torch
sys.path.insert(0, sys.argv[2])
import slownet
model, (x,) = slownet.build()
with torch.no_grad():
    torch.save(model(x), sys.argv[1])
print(["_forge_runtime" in b.__dict__ for b in model.blocks])
"""
ws, said = sys.argv[1], {}
for label, extra in (("forge", {}), ("original", {"FORGE_DISABLE": "1"})):
    p = subprocess.run([sys.executable, "-c", run, os.path.join(ws, label + ".pt"), ws], capture_output=True, text=True,
                       env={**os.environ, **extra})
    said[label] = p.stdout.strip() if p.returncode == 0 else "failed: " + p.stderr[-400:]
import torch
a, b = (torch.load(os.path.join(ws, l + ".pt")) for l in ("forge", "original"))
print(json.dumps({**said, "max_abs": float((a - b).abs().max())}))
`;

/**
 * A module whose kernel is CUDA in a string of its own .py file (load_inline), explained from a profile recorded on the
 * GPU machine (`benchmarks/record_explain.py`): stand-ins for ncu and nvidia-smi (tests/fixtures/explain_replay/bin) on
 * the server's PATH answer its profile with the recorded report; the server's reader, analysis and line mapping are
 * its own. Without a recording the step is skipped.
 */
const REPLAY = path.join(REPO, "tests", "fixtures", "explain_replay");
const GPU_MODULE_FILE = "gather_half.py";
const GPU_MODULE = fs.readFileSync(path.join(REPLAY, GPU_MODULE_FILE), "utf8");
const RECORDING_FILE = path.join(REPLAY, "recording", "recording.json");
const RECORDING: { device_name: string; latency_ms: number } | undefined = fs.existsSync(RECORDING_FILE)
  ? JSON.parse(fs.readFileSync(RECORDING_FILE, "utf8"))
  : undefined;
const GPU_CLASS_LINE_TEXT = "class GatherHalf(nn.Module)";
/** The kernel's line the recording's stalls are on (1-based), inside the module's CUDA string. */
const HOT_LINE_TEXT = "// HOT";
const HOT_LINE = GPU_MODULE.split("\n").findIndex((l) => l.includes(HOT_LINE_TEXT)) + 1;

function coderReply(marker: string): string {
  return JSON.stringify({ summary: `vectorized softmax (${marker})`, source: `${FAST}\n# ${marker}\n` });
}

function workspaceSettings(baseUrl: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    "forge.interpreter": process.env.FORGE_PYTHON || path.join(REPO, ".venv", "bin", "python"),
    "forge.model": "scripted",
    "forge.baseUrl": baseUrl,
    "forge.device": "cpu",
    "forge.search": "linear",
    "forge.rounds": 1,
    "forge.offline": false,
    "forge.profile": false,
    ...extra,
  };
}

const count = (text: string, needle: string) => text.split(needle).length - 1;
/** One optimize run takes ~3 s here (1 round, scripted model, tiny shapes); a slow CI box gets plenty more. */
const OPTIMIZE_TIMEOUT_MS = 120_000;

// 10 minutes: the budget of the whole run (a normal one takes under 2 minutes once installed)
test("forge-lsp in a real VS Code (code-server): the acceptance scenario", { timeout: 15 * 60_000 }, async (t) => {
  const h = await Harness.start({
    files: { [MODULE_FILE]: TASK, [BLOCKS_FILE]: BLOCKS, [NET_FILE]: NET, [GPU_MODULE_FILE]: GPU_MODULE },
    settings: (url) => workspaceSettings(url),
    binDirs: RECORDING ? [path.join(REPLAY, "bin")] : [],
  });
  const wb = h.wb;
  /** The first run's speedup as its notification says it; the lens, the review and Run Details must say the same. */
  let speedup = "";
  const onDisk = () => h.readWorkspaceFile(MODULE_FILE);

  /** Lines of the Runs view grouped: each run row with the title of the group it is in. */
  const runRows = async () => {
    const rows = await wb.treeRows(UI.runsView);
    let group = "";
    return rows.flatMap((r) => {
      if (r.level === 1) {
        group = r.label;
        return [];
      }
      return r.level === 2 ? [{ ...r, group }] : [];
    });
  };

  /** Click Optimize on the class and wait for the run's "faster candidate" notification. */
  const optimizeUntilCandidate = async (s: StepContext, marker: string) => {
    await wb.clearNotifications(); // an older "faster candidate" toast must not be mistaken for this run's
    const before = h.fake.chatRequests().length;
    h.fake.script(coderReply(marker));
    const since = Date.now();
    await wb.clickCodeLens(UI.lens.optimize, 60_000);
    const note = await wb.waitForNotification(UI.candidateFound, OPTIMIZE_TIMEOUT_MS, () => true, since);
    s.check(h.fake.chatRequests().length === before + 1, `one model request per run (saw ${h.fake.chatRequests().length - before})`);
    return note;
  };

  /** The inline review is shown: its lenses and its red/green lines. */
  const waitForInlineReview = async () => {
    await wb.waitForCodeLens(UI.review.acceptAll, 15_000);
    return until("red (removed) and green (added) review lines", async () => {
      const d = await wb.reviewDecorations();
      return d.red.length > 0 && d.green.length > 0 ? d : undefined;
    }, { timeoutMs: 10_000, lastSeen: async () => JSON.stringify(await wb.reviewDecorations()) });
  };

  /** The editor shows a line and not another (e.g. after VS Code reloaded a file changed on disk: its editor was clean). */
  const waitForEditorToShow = (lineText: string, absent: string) =>
    until(`the editor to show "${lineText}" and not "${absent}"`, async () => {
      const lines = await wb.visibleLines();
      return lines.some((l) => l.text.includes(lineText)) && !lines.some((l) => l.text.includes(absent));
    }, { timeoutMs: 20_000, lastSeen: async () => JSON.stringify((await wb.visibleLines()).slice(0, 14)) });

  /** The newest optimize run (first optimize row: finished runs are listed newest first) stops offering its candidate. */
  const expectNewestRunNotOffering = async (s: StepContext, when: string) => {
    // the view refreshes from forge/runs on its own schedule: give it a few seconds
    await s.soft(`the rejected run's row no longer says "faster candidate found" ${when}`, () => until("the row to change", async () => {
      const row = (await runRows()).find((r) => r.label.startsWith(UI.runLabel.optimize) && !UI.runningGroup.test(r.group));
      return row && !UI.runOffersCandidate.test(row.description) ? row : undefined;
    }, { timeoutMs: 10_000, lastSeen: () => runRows().then((r) => JSON.stringify(r.slice(0, 2))) }));
  };

  try {
    // ---------------------------------------------------------------------------------------------
    await h.step(t, "a-open-module", async (s) => {
      await wb.openFile(MODULE_FILE);
      // the extension activates on Python, probes the interpreter, starts the server; the server
      // indexes the file and answers code lenses: the Optimize lens is the sign all of that worked
      await wb.waitForCodeLens(UI.lens.optimize, 90_000);
      const lenses = await wb.codeLenses();
      for (const text of [UI.lens.optimize, UI.lens.profile, UI.lens.explain]) {
        const lens = lenses.find((l) => l.text === text);
        s.check(!!lens, `lens "${text}" shown (lenses: ${JSON.stringify(lenses)})`);
        if (lens) s.check(lens.aboveLine.startsWith(CLASS_LINE_TEXT), `lens "${text}" sits over "${CLASS_LINE_TEXT}" (it is over "${lens.aboveLine}")`);
      }
      const forgeLog = logFiles(h.userDataDir).forge.map((f) => fs.readFileSync(f, "utf8")).join("\n");
      s.check(UI.serverStarted.test(forgeLog), `the Forge channel says the server started:\n${forgeLog.slice(-1500)}`);
      const crash = (await wb.notifications(true)).filter((n) => UI.crashed.test(n.message));
      s.check(crash.length === 0, `no crash/start-failure notification: ${JSON.stringify(crash)}`);
      const actions = await wb.codeActionTitles(CLASS_LINE);
      await s.shot("a-code-actions");
      await wb.closeMenus();
      s.check(actions.some((a) => a.includes(UI.codeActionOptimize)), `code action "${UI.codeActionOptimize}" offered on the class line (menu: ${JSON.stringify(actions)})`);
    }, { critical: true });

    // ---------------------------------------------------------------------------------------------
    await h.step(t, "b-optimize-progress", async (s) => {
      await wb.clearNotifications();
      const before = h.fake.chatRequests().length;
      h.fake.script(coderReply("e2e accept"));
      const since = Date.now();
      await wb.clickCodeLens(UI.lens.optimize);
      // the run takes a few seconds on the CPU: wait for both at once, so neither is missed
      const candidate = wb.waitForNotification(UI.candidateFound, OPTIMIZE_TIMEOUT_MS, () => true, since);
      candidate.catch(() => undefined); // awaited below; a rejection before that is not "unhandled"
      const progress = await s.soft("a progress notification titled like /optimize Model/ with a Cancel button", () =>
        wb.waitForNotification(UI.progressTitle, 20_000, (n) => n.buttons.includes(UI.cancelButton), since));
      if (!progress) s.note(`status bar while running: ${await wb.statusBarText()}`);
      await s.shot("b-optimize-running");
      const done = await candidate;
      for (const b of UI.candidateButtons) s.check(done.buttons.includes(b), `the candidate notification has a "${b}" button (${JSON.stringify(done)})`);
      speedup = UI.speedupLabel.exec(done.message)?.[0] ?? "";
      s.check(speedup !== "" && UI.runEnded.test(done.message), `the notification names the module, its file and the speedup as "${UI.speedupLabel.source}" (${done.message})`);
      await s.soft("the server's lens over the class says the same speedup", () => until("the Show diff lens", async () =>
        (await wb.codeLenses()).find((l) => UI.lens.showDiff.test(l.text) && l.text.includes(speedup)),
      { timeoutMs: 10_000, lastSeen: () => wb.codeLenses().then((l) => JSON.stringify(l.map((x) => x.text))) }));
      if (progress) {
        const stillRunning = (await wb.notifications()).filter((n) => UI.progressTitle.test(n.message) && n.buttons.includes(UI.cancelButton));
        s.check(stillRunning.length === 0, `the progress notification ended with the run (${JSON.stringify(stillRunning)})`);
      }
      const chats = h.fake.chatRequests();
      s.check(chats.length === before + 1, `one model request for the run (saw ${chats.length - before})`);
      s.check(chats[chats.length - 1]?.headers.authorization === `Bearer ${h.apiKey}`, "the model server got the key from code-server's environment");
    });

    // ---------------------------------------------------------------------------------------------
    await h.step(t, "c-inline-review", async (s) => {
      s.check(onDisk() === TASK, "the file on disk is the original before the review");
      await wb.clickNotificationButton(UI.candidateFound, "Review");
      const deco = await waitForInlineReview();
      // forge's rewrite keeps the original class (renamed) and adds the optimized one after it: the
      // old class line is removed (red), the renamed one and the new code are added (green)
      s.check(deco.red.some((l) => l.text.startsWith(CLASS_LINE_TEXT)), `"${CLASS_LINE_TEXT}" is shown removed (red): ${JSON.stringify(deco.red)}`);
      s.check(deco.green.some((l) => /class _ModelReference|class _ModelForge|class ModelNew/.test(l.text)),
        `the candidate's lines are shown added (green): ${JSON.stringify(deco.green.slice(0, 10))}`);
      s.check(deco.struck.length > 0, "removed lines are struck through");
      const lenses = (await wb.codeLenses()).map((l) => l.text);
      for (const l of [UI.review.acceptAll, UI.review.rejectAll, UI.review.acceptHunk, UI.review.rejectHunk]) {
        s.check(lenses.includes(l), `review lens "${l}" shown (${JSON.stringify(lenses)})`);
      }
      s.check(lenses.some((l) => UI.review.header.test(l)), `review header lens ${UI.review.header} (${JSON.stringify(lenses)})`);
      s.check(lenses.some((l) => UI.review.header.test(l) && l.includes(speedup)), `the review's header says the speedup as the notification did ("${speedup}")`);
      s.check(UI.reviewingStatus.test(await wb.statusBarText()), `the status bar says it is reviewing (${await wb.statusBarText()})`);
      // The README picture: the class at the top, the hunk's red and green lines and its lenses.
      await wb.moveMouseAway();
      await wb.clearNotifications();
      await waitForInlineReview();
      const readme = path.join(h.artifacts, "README-inline-review.png");
      await h.page.locator(".part.editor").screenshot({ path: readme });
      await s.shot("c-inline-review");
      // Autosave ("afterDelay", 1 s) has had its chance: the review must not have reached the disk.
      await delay(2500);
      const disk = onDisk();
      s.check(disk === TASK, `the file on disk is still the original while the review is shown (autosave on)` +
        (disk === TASK ? "" : `; on disk now: ${disk.length} chars, ${count(disk, SLOW_LINE)}× the slow line, ` +
          `${count(disk, "class ModelNew")}× "class ModelNew", ${count(disk, "_ModelReference")}× "_ModelReference"`));
      const warn = (await wb.notifications(true)).filter((n) => /saved with the review/i.test(n.message));
      s.check(warn.length === 0, `no "saved with the review's lines" warning (${JSON.stringify(warn)})`);
    });

    // ---------------------------------------------------------------------------------------------
    await h.step(t, "d-accept-all", async (s) => {
      const since = Date.now();
      await wb.clickCodeLens(UI.review.acceptAll, 10_000);
      await s.soft("the review lenses to go away", () => until("no review lenses", async () =>
        !(await wb.codeLenses()).some((l) => l.text === UI.review.acceptAll), { timeoutMs: 15_000 }));
      await s.soft("an 'accepted' notification", () => wb.waitForNotification(UI.accepted, 15_000, () => true, since));
      await wb.save();
      const disk = await s.soft("the rewritten module on disk", () => until("the rewrite on disk", () => {
        const d = onDisk();
        return d.includes("# --- forge: begin optimized Model") ? d : undefined;
      }, { timeoutMs: 15_000, lastSeen: () => onDisk().slice(0, 600) }));
      if (disk !== undefined) {
        for (const needle of REWRITE_ONCE) s.check(count(disk, needle) === 1, `"${needle}" appears once on disk (${count(disk, needle)}×)`);
        // the review showed the old class line (red) above the new ones (green): none of it may stay
        s.check(count(disk, CLASS_LINE_TEXT) === 0, `no leftover review line "${CLASS_LINE_TEXT}" on disk (${count(disk, CLASS_LINE_TEXT)}×)`);
        s.check(count(disk, "class ModelNew") === 0, `the candidate's class is renamed on disk (${count(disk, "class ModelNew")}× "class ModelNew")`);
        // the file is the module the user wanted: valid Python whose Model computes the softmax
        try {
          execFileSync(h.python, ["-c", [
            "import runpy, sys, torch",
            "m = runpy.run_path(sys.argv[1])",
            "x = torch.randn(5, 7)",
            "assert torch.allclose(m['Model']()(x), torch.softmax(x, dim=1), atol=1e-6), 'wrong values'",
          ].join("\n"), path.join(h.workspace, MODULE_FILE)], { stdio: "pipe", timeout: 60_000, env: { ...process.env, OMP_NUM_THREADS: "1" } });
        } catch (err) {
          s.check(false, `the accepted file runs and computes the softmax: ${String((err as { stderr?: Buffer }).stderr ?? err).slice(-1500)}`);
        }
      }
      s.check(!UI.reviewingStatus.test(await wb.statusBarText()), `the status bar no longer says reviewing (${await wb.statusBarText()})`);
      await s.soft("no proposal squiggle on the class line", () => until("no squiggle on the class line", async () =>
        (await wb.squigglesOnLine("class Model(")).length === 0 ? true : undefined,
      { timeoutMs: 10_000, lastSeen: () => wb.squigglesOnLine("class Model(").then((x) => JSON.stringify(x)) }));
      const lenses = (await wb.codeLenses()).map((l) => l.text);
      s.check(!lenses.some((l) => UI.lens.showDiff.test(l)), `no "Show diff" lens left (${JSON.stringify(lenses)})`);
    });

    // ---------------------------------------------------------------------------------------------
    await h.step(t, "e-optimize-reject", async (s) => {
      // back to the slow module (as `git checkout` would): the accepted one has nothing left to gain
      h.writeWorkspaceFile(MODULE_FILE, TASK);
      await waitForEditorToShow(CLASS_LINE_TEXT, "_ModelReference");
      // the user closes the file while the run goes (the model answers after 4 s): the candidate must
      // still be announced and reviewable (it used to be found only through the open file's lenses)
      await wb.clearNotifications();
      h.fake.script({ delay: 4, content: coderReply("e2e reject") });
      const started = Date.now();
      await wb.clickCodeLens(UI.lens.optimize, 60_000);
      await wb.runCommand("View: Close All Editors");
      s.check(!(await wb.tabs()).some((x) => x.includes(MODULE_FILE)), `the file is closed while its run goes (${JSON.stringify(await wb.tabs())})`);
      await s.soft("the run's candidate announced for the closed file, with Review", () =>
        wb.waitForNotification(UI.candidateFound, OPTIMIZE_TIMEOUT_MS, (n) => n.buttons.includes("Review"), started));
      await wb.clickNotificationButton(UI.candidateFound, "Review");
      const review = await s.soft("the inline review to open", () => waitForInlineReview());
      const since = Date.now();
      if (review) {
        await wb.clickCodeLens(UI.review.rejectAll, 10_000);
        await s.soft("a 'rejected' notification", () => wb.waitForNotification(UI.rejected, 15_000, () => true, since));
      } else {
        // so that the rest of the step (disk, Runs view) is still checked: reject from the server's lens
        s.note("no inline review: rejected with the server's own Reject lens instead");
        await wb.clickCodeLens(UI.lens.reject, 10_000);
        await until("the proposal's lenses to go", async () => !(await wb.codeLenses()).some((l) => UI.lens.showDiff.test(l.text)),
          { timeoutMs: 10_000, lastSeen: () => wb.codeLenses().then((l) => JSON.stringify(l.map((x) => x.text))) });
      }
      await waitForEditorToShow(SLOW_LINE, "_ModelForge");
      await delay(2500); // autosave's chance to write whatever the buffer holds
      s.check(onDisk() === TASK, `the file on disk is unchanged after Reject all (${onDisk().length} chars vs ${TASK.length})`);
      await wb.openActivity(UI.container);
      await expectNewestRunNotOffering(s, "after Reject all");
    });

    // ---------------------------------------------------------------------------------------------
    await h.step(t, "f-side-by-side-review", async (s) => {
      h.writeWorkspaceSettings(workspaceSettings(h.fake.baseUrl, { "forge.diffMode": "sideBySide" }));
      try {
        await wb.openFile(MODULE_FILE);
        await optimizeUntilCandidate(s, "e2e side by side");
        await wb.clickNotificationButton(UI.candidateFound, "Review");
        await until("a diff editor", () => wb.diffEditorVisible(), { timeoutMs: 15_000, lastSeen: () => wb.tabs().then((x) => x.join(", ")) });
        const tabs = await wb.tabs();
        s.check(tabs.some((x) => UI.sideBySideTab.test(x)), `a "${UI.sideBySideTab}" diff tab (${JSON.stringify(tabs)})`);
        // the diff editor shows up before its modified side has rendered its lines (on a loaded machine, seconds)
        const newCode = /_ModelForge|ModelNew|softmax\(x, dim=1\)/;
        const modifiedText = async () => (await wb.visibleLines()).map((l) => l.text).join("\n");
        await until("the candidate side to render", async () => newCode.test(await modifiedText()), { timeoutMs: 10_000 }).catch(() => undefined);
        const modified = await modifiedText();
        s.check(newCode.test(modified), `the candidate side shows the new code:\n${modified.slice(0, 800)}`);
        await s.shot("f-side-by-side");
        const since = Date.now();
        await wb.clickEditorAction(UI.rejectCandidateAction);
        await s.soft("a 'rejected' notification", () => wb.waitForNotification(UI.rejected, 15_000, () => true, since));
        await s.soft("the diff editor to close", () => until("no diff editor", async () => !(await wb.diffEditorVisible()), { timeoutMs: 10_000 }));
        s.check(onDisk() === TASK, "the file on disk is unchanged after rejecting side by side");
        await wb.openActivity(UI.container);
        await expectNewestRunNotOffering(s, "after rejecting side by side");
      } finally {
        h.writeWorkspaceSettings(workspaceSettings(h.fake.baseUrl));
      }
    });

    // ---------------------------------------------------------------------------------------------
    await h.step(t, "f2-review-inline-from-details", async (s) => {
      await wb.openFile(MODULE_FILE);
      await optimizeUntilCandidate(s, "e2e details review");
      await wb.clickNotificationButton(UI.candidateFound, "Details");
      const button = wb.webview().locator('button[data-command="review"]');
      await button.waitFor({ timeout: 20_000 });
      s.check((await button.innerText()).trim() === UI.details.reviewInline, `the details page offers "${UI.details.reviewInline}"`);
      await button.click();
      await s.soft("the inline review to open", () => waitForInlineReview());
      // the details page sits beside the file: the review must open in the file's group, not in the page's
      const groups = await wb.groupTabs();
      const withFile = groups.filter((g) => g.some((x) => x.includes("softmax_mod")));
      s.check(withFile.length === 1, `one editor group shows the file and its review, not two (groups: ${JSON.stringify(groups)})`);
      await s.shot("f2-review-from-details");
      const since = Date.now();
      await wb.clickCodeLens(UI.review.rejectAll, 10_000);
      await s.soft("a 'rejected' notification", () => wb.waitForNotification(UI.rejected, 15_000, () => true, since));
      await delay(2500); // autosave's chance to write whatever the buffer holds
      s.check(onDisk() === TASK, "the file on disk is unchanged after rejecting the review opened from Run Details");
      await wb.runCommand("View: Close All Editors");
    });

    // ---------------------------------------------------------------------------------------------
    await h.step(t, "g-runs-view-and-details", async (s) => {
      await wb.runCommand("View: Show Explorer"); // so that opening Forge is a real switch of containers
      await wb.openActivity(UI.container);
      const rows = await until("three optimize runs in the Runs view", async () => {
        const r = await runRows();
        return r.filter((x) => x.label.startsWith(UI.runLabel.optimize)).length >= 3 ? r : undefined;
      }, { timeoutMs: 15_000, lastSeen: () => runRows().then((r) => JSON.stringify(r)) });
      for (const r of rows) {
        const shown = `${r.label} ${r.description}`;
        s.check(/optimize|profile|explain/.test(shown) && shown.includes("Model"), `row shows kind and target: "${shown}"`);
        s.check(shown.includes(MODULE_FILE), `row shows the file name ${MODULE_FILE}: "${shown}"`);
      }
      // the first run (accepted): the oldest optimize row, at the bottom of Done (newest first)
      const optimizeRows = rows.filter((r) => r.label.startsWith(UI.runLabel.optimize));
      const first = optimizeRows[optimizeRows.length - 1];
      const row = await wb.treeRow(UI.runsView, (r) => r.label === first.label && r.description === first.description);
      await row.click();
      const body = await until("the Run Details webview's text", async () => {
        const text = await wb.webview().locator("body").innerText({ timeout: 2000 });
        return /candidate/i.test(text) ? text : undefined;
      }, { timeoutMs: 20_000, lastSeen: () => wb.tabs().then((x) => `tabs: ${x.join(", ")}`) });
      s.note(`Run Details text:\n${body.slice(0, 1500)}`);
      s.check(UI.details.oneCandidate.test(body), `says "1 candidate"`);
      s.check(!UI.details.pluralBug.test(body), `does not say "1 candidates"`);
      s.check(!UI.details.fileUri.test(body), `no file:// URI (${(/file:\/\/\S+/.exec(body) ?? [""])[0]})`);
      s.check(body.includes(MODULE_FILE), `shows the file as a workspace-relative path (${MODULE_FILE})`);
      const at = body.search(UI.details.candidatesSection);
      const candidates = at >= 0 ? body.slice(at) : body;
      s.check(UI.details.finalRetiming.test(candidates), `the candidates' speedups: the final re-timing one is labelled ("final re-timing")`);
      s.check(UI.details.search.test(candidates), `the candidates' speedups: the search one is labelled ("search")`);
      s.check(speedup !== "" && body.includes(speedup), `the page says the run's speedup as the notification did ("${speedup}")`);
      await s.shot("g-run-details");
      await wb.runCommand("View: Close All Editors");
      await wb.openFile(MODULE_FILE);
    });

    // ---------------------------------------------------------------------------------------------
    await h.step(t, "g2-full-report", async (s) => {
      await wb.openActivity(UI.container);
      const rows = (await runRows()).filter((r) => r.label.startsWith(UI.runLabel.optimize) && !UI.runningGroup.test(r.group));
      // the first run (its candidate accepted): the oldest optimize row, at the bottom of Done (newest first)
      const first = rows[rows.length - 1];
      const row = await wb.treeRow(UI.runsView, (r) => r.label === first.label && r.description === first.description);
      await row.click();
      const button = wb.webview().locator('button[data-command="report"]');
      await button.waitFor({ timeout: 20_000 });
      s.check((await button.innerText()).trim() === UI.report.button, `the details page offers "${UI.report.button}"`);
      const consoleSeen = h.console.all.length;
      const problemsSeen = h.console.problems.length;
      await button.click();
      // the server writes the report (forge.openReport, show: false); the extension shows the page in a webview
      const report = await wb.webviewFrameWith("#forge-data", 60_000);
      const ready = await until("the report's script to finish (body[data-ready])", () =>
        report.evaluate(() => document.body.dataset.ready).then((v) => v || undefined), { timeoutMs: 30_000 });
      s.check(ready === "true", `the report's script ran to its end (data-ready="${ready}")`);
      const tabs = await wb.tabs();
      const runId = tabs.map((x) => UI.report.tab.exec(x)?.[1]).find(Boolean) ?? "";
      s.check(runId !== "", `a "Report <run>" tab (${JSON.stringify(tabs)})`);
      const heading = await report.locator("h1").innerText();
      s.check(runId !== "" && heading.includes(runId), `the page is the report of that run ("${heading}")`);
      // the tree: the reference and the run's one candidate
      const nodes = await report.locator("#tree .node").evaluateAll((els) => els.map((e) => e.getAttribute("data-id") ?? ""));
      s.check(nodes.length === 2 && nodes[0] === "@ref", `the tree shows the reference and the run's candidate (${JSON.stringify(nodes)})`);
      const cid = nodes.find((n) => n !== "@ref") ?? "";
      // the best candidate is shown at first: its verdict and its source, highlighted
      const shown = await report.locator("#candidate").getAttribute("data-candidate");
      s.check(shown === cid, `the candidate panel shows ${cid} at first (shows ${shown})`);
      const panel = await report.locator("#candidate").innerText();
      s.note(`report candidate panel:\n${panel.slice(0, 1200)}`);
      s.check(/verdict/i.test(panel) && /\bcorrect\b/.test(panel), "the candidate's verdict (correct) is shown");
      s.check((await report.locator("#candidate pre.source").innerText()).includes("torch.softmax(x, dim=1)"), "the candidate's source is shown");
      s.check(await report.locator("#candidate pre.source code.hljs .hljs-keyword").count() > 0, "the source is highlighted (highlight.js ran)");
      for (const chart of ["#chart-rounds", "#chart-time", "#chart-cost"]) {
        s.check(await report.locator(`${chart} .uplot canvas`).count() === 1, `the chart ${chart} is drawn (uPlot)`);
      }
      s.check((await report.locator("#roofline-section").innerText()).includes("Roofline"), "the roofline section is there");
      // clicking a node shows it: the reference, then the candidate again
      await report.locator("#tree .node[data-id='@ref'] circle").click();
      await s.soft("the reference shown after clicking its node", () => report.locator("#candidate[data-candidate='@ref']").waitFor({ timeout: 10_000 }));
      s.check((await report.locator("#candidate").innerText()).includes("Reference"), "the reference's panel says so");
      await report.locator(`#tree .node[data-id='${cid}'] circle`).click();
      await s.soft(`${cid} shown again after clicking its node`, () => report.locator(`#candidate[data-candidate='${cid}']`).waitFor({ timeout: 10_000 }));
      // nothing loaded from anywhere, nothing refused by the page's Content-Security-Policy, no error
      const loads = await report.evaluate(() => performance.getEntriesByType("resource").map((e) => e.name));
      s.check(loads.length === 0, `the report loads nothing (${JSON.stringify(loads)})`);
      const csp = h.console.all.slice(consoleSeen).filter((l) => UI.report.cspViolation.test(l));
      s.check(csp.length === 0, `no Content-Security-Policy violation in the console:\n${csp.slice(0, 5).join("\n")}`);
      const errors = h.console.problems.slice(problemsSeen);
      s.check(errors.length === 0, `no console error while the report was opened and used:\n${formatProblems(errors)}`);
      await s.shot("g2-full-report");
      await wb.runCommand("View: Close All Editors");
      await wb.openFile(MODULE_FILE);
    });

    // ---------------------------------------------------------------------------------------------
    await h.step(t, "h-cancel", async (s) => {
      await wb.clearNotifications();
      const before = h.fake.chatRequests().length;
      // the model answers only after 60 s: the run is waiting on it when Cancel is clicked
      h.fake.script({ delay: 60, content: coderReply("e2e cancel (never used)") });
      const since = Date.now();
      await wb.clickCodeLens(UI.lens.optimize);
      await until("the run's (delayed) model request", () => h.fake.chatRequests().length > before, { timeoutMs: 60_000 });
      const progress = await s.soft("a progress notification with Cancel", () =>
        wb.waitForNotification(UI.progressTitle, 10_000, (n) => n.buttons.includes(UI.cancelButton), since));
      const t0 = Date.now();
      if (progress) {
        await wb.clickNotificationButton(UI.progressTitle, UI.cancelButton);
      } else {
        // so that the next steps are not blocked by this run: cancel it from the Runs view instead
        await wb.openActivity(UI.container);
        const row = await wb.treeRow(UI.runsView, (r) => r.label.startsWith(UI.runLabel.optimize) && r.level === 2);
        await row.hover();
        await row.locator('.action-label[aria-label^="Cancel Run"]').click();
        s.note("cancelled from the Runs view's inline action (no progress notification to cancel from)");
      }
      await wb.openActivity(UI.container);
      const cancelled = await s.soft("the run shown as cancelled in the Runs view within 10 s", () => until("a cancelled optimize run", async () =>
        (await runRows()).find((r) => r.label.startsWith(UI.runLabel.optimize) && UI.runCancelled.test(r.description) && !UI.runningGroup.test(r.group)),
      { timeoutMs: 10_000, lastSeen: () => runRows().then((r) => JSON.stringify(r)) }));
      if (cancelled) s.note(`cancelled after ${((Date.now() - t0) / 1000).toFixed(1)} s: ${cancelled.group} / ${cancelled.label} — ${cancelled.description}`);
      await s.shot("h-cancelled");
    });

    // ---------------------------------------------------------------------------------------------
    await h.step(t, "h2-offline-only-run", async (s) => {
      // no model: the run is the offline candidates (torch.compile of the module), then the final re-timing
      const logged = () => logFiles(h.userDataDir).forge.map((f) => fs.readFileSync(f, "utf8")).join("\n");
      const settingsLines = (logged().match(/settings changed:/g) ?? []).length;
      h.writeWorkspaceSettings(workspaceSettings(h.fake.baseUrl, { "forge.model": null, "forge.offline": true }));
      try {
        await until("the server to take the new settings", () => (logged().match(/settings changed:.*model=None/g) ?? []).length > 0 &&
          (logged().match(/settings changed:/g) ?? []).length > settingsLines, { timeoutMs: 20_000, lastSeen: () => logged().slice(-800) });
        await wb.openFile(MODULE_FILE);
        await wb.clearNotifications();
        const before = h.fake.chatRequests().length;
        const since = Date.now();
        await wb.clickCodeLens(UI.lens.optimize);
        const end = await wb.waitForNotification(UI.runEnded, 300_000, (n) => UI.offlineOutcome.test(n.message), since);
        s.note(`the run ended with: ${end.message}`);
        const seen = (await wb.seenNotifications(since)).map((n) => n.message);
        s.check(seen.some((m) => UI.offlineProgress.test(m)), `the progress said "offline candidates" (${JSON.stringify(seen)})`);
        s.check(!seen.some((m) => UI.roundZero.test(m)), `the progress never said "round 0/…" (${JSON.stringify(seen)})`);
        s.check(h.fake.chatRequests().length === before, "no model request without a model");
        await s.shot("h2-offline-only");
      } finally {
        h.writeWorkspaceSettings(workspaceSettings(h.fake.baseUrl));
      }
    });

    // ---------------------------------------------------------------------------------------------
    await h.step(t, "i-explain-hover", async (s) => {
      await wb.clearNotifications();
      await wb.openFile(MODULE_FILE);
      await wb.clickCodeLens(UI.lens.explain);
      await wb.openActivity(UI.container);
      const row = await until("the explain run to finish", async () =>
        (await runRows()).find((r) => r.label.startsWith(UI.runLabel.explain) && !UI.runningGroup.test(r.group)),
      { timeoutMs: 120_000, intervalMs: 500, lastSeen: () => runRows().then((r) => JSON.stringify(r)) });
      s.check(!/failed/i.test(row.group), `the explain run did not fail: ${row.group} / ${row.description}`);
      const hover = await wb.hoverLine(CLASS_LINE_TEXT);
      await s.shot("i-hover");
      s.note(`hover text:\n${hover}`);
      s.check(UI.hover.title.test(hover), `the hover is forge's (${UI.hover.title})`);
      const numbered = hover.split("\n").filter((l) => UI.hover.number.test(l));
      s.check(numbered.length > 0, "the hover shows measured numbers");
      for (const l of numbered) s.check(UI.hover.measuredBy.test(l), `the number is labelled with how it was measured: "${l.trim()}"`);
      await wb.moveMouseAway();
    });

    // ---------------------------------------------------------------------------------------------
    await h.step(t, "i2-explain-load-inline-gpu-recording", async (s) => {
      const G = UI.gpuExplain;
      const logged = () => logFiles(h.userDataDir).forge.map((f) => fs.readFileSync(f, "utf8")).join("\n");
      h.writeWorkspaceSettings(workspaceSettings(h.fake.baseUrl, { "forge.device": "cuda:0" }));
      try {
        await until("the server to take device cuda:0", async () => G.settingsTaken.test(logged()) || undefined,
          { timeoutMs: 20_000, lastSeen: async () => logged().slice(-800) });
        await wb.clearNotifications();
        await wb.openFile(GPU_MODULE_FILE);
        await wb.waitForCodeLens(UI.lens.explain, 60_000);
        await wb.clickCodeLens(UI.lens.explain);
        await wb.openActivity(UI.container);
        const row = await until("the explain run to finish", async () =>
          (await runRows()).find((r) => r.label.startsWith(G.runLabel) && !UI.runningGroup.test(r.group)),
        { timeoutMs: 180_000, intervalMs: 500, lastSeen: () => runRows().then((r) => JSON.stringify(r)) });
        s.check(!/failed/i.test(row.group), `the explain run did not fail: ${row.group} / ${row.description}`);
        await wb.openFile(GPU_MODULE_FILE);
        // the finding on the kernel's hot line: a line of the .py file, inside its CUDA string
        await s.soft("a diagnostic (info squiggle) on the hot line inside the CUDA string", () => until("the hot line's squiggle",
          async () => (await wb.squigglesOnLine(HOT_LINE_TEXT)).includes("info") || undefined,
          { timeoutMs: 20_000, lastSeen: () => wb.squigglesOnLine(HOT_LINE_TEXT).then((x) => JSON.stringify(x)) }));
        // and none outside the string (the class line has the explanation's summary, a hint)
        const lines = GPU_MODULE.split("\n");
        const [first, last] = [lines.findIndex((l) => l.endsWith('r"""')) + 1, lines.findIndex((l) => l.startsWith('"""')) + 1];
        const outside = (await wb.visibleLines()).filter((l) => (l.line < first || l.line > last) && l.text.trim() &&
          lines.filter((x) => x.includes(l.text.trim())).length === 1);
        for (const l of outside) {
          const sq = await wb.squigglesOnLine(l.text.trim());
          s.check(!sq.includes("info"), `no finding outside the CUDA string, on line ${l.line} "${l.text.trim()}" (${JSON.stringify(sq)})`);
        }
        const lineHover = await wb.hoverLine(HOT_LINE_TEXT);
        await s.shot("i2-hot-line-hover");
        s.note(`hot line hover:\n${lineHover}`);
        s.check(G.lineFinding.test(lineHover), `the hot line's hover is a finding with what was measured there (${G.lineFinding})`);
        await wb.moveMouseAway();
        const hover = await wb.hoverLine(GPU_CLASS_LINE_TEXT);
        await s.shot("i2-class-hover");
        s.note(`class hover:\n${hover}`);
        s.check(G.title.test(hover), `the hover is forge's (${G.title})`);
        const m = G.measured.exec(hover);
        s.check(!!m, `the hover says the kernel time and how it was measured (${G.measured})`);
        if (m && RECORDING) {
          s.check(m[3] === RECORDING.device_name, `measured on the recording's GPU, ${RECORDING.device_name} (hover: ${m[3]})`);
          const ms = Number(m[1]) / (m[2] === "µs" ? 1000 : 1);
          s.check(Math.abs(ms - RECORDING.latency_ms) < 1e-4, `the time is the recording's, ${RECORDING.latency_ms} ms (hover: ${m[1]} ${m[2]})`);
        }
        s.check(G.roofline.test(hover), `the roofline says which peaks it is placed against (${G.roofline})`);
        s.check(hover.includes(G.hottest(HOT_LINE)), `the hover names the hot line, ${HOT_LINE}`);
        for (const l of hover.split("\n").filter((x) => UI.hover.number.test(x))) {
          s.check(UI.hover.measuredBy.test(l), `the number is labelled with how it was measured: "${l.trim()}"`);
        }
      } finally {
        await wb.moveMouseAway();
        h.writeWorkspaceSettings(workspaceSettings(h.fake.baseUrl));
      }
    }, { skip: RECORDING ? undefined : "no GPU recording yet: run `python benchmarks/record_explain.py` on the GPU machine" });

    // ---------------------------------------------------------------------------------------------
    await h.step(t, "k-model-wide-accept-undo", async (s) => {
      const M = UI.modelWide;
      await wb.openFile(NET_FILE);
      await wb.waitForCodeLens(M.findHotSpots, 60_000);
      await wb.clickCodeLens(M.findHotSpots);
      await s.soft("the hot-spot run ends (status bar)", () => until("the hot-spot run's end", async () =>
        M.hotSpotsDone.test(await wb.statusBarText()) || undefined, { timeoutMs: 180_000, intervalMs: 500, lastSeen: () => wb.statusBarText() }));
      await wb.openFile(BLOCKS_FILE);
      await s.soft("the hot class's share of the model's time is a lens on SlowBlock", () => until("the hot class's lens",
        async () => (await wb.codeLenses()).find((l) => M.hotClass.test(l.text) && l.aboveLine.startsWith("class SlowBlock")),
        { timeoutMs: 20_000, lastSeen: () => wb.codeLenses().then((l) => JSON.stringify(l)) }));
      await s.shot("k-hot-spots");
      await wb.openFile(NET_FILE);
      await wb.clearNotifications();
      const chats = h.fake.chatRequests().length;
      h.fake.script({ content: () => JSON.stringify({
        summary: "one softmax per call, as a subclass",
        source: h.readWorkspaceFile(".forge/tasks/SlowBlock.py").trimEnd() + SUBCLASS,
      }) });
      const since = Date.now();
      await wb.clickCodeLens(M.optimize, 30_000);
      const done = await wb.waitForNotification(M.ended, 400_000, () => true, since);
      s.note(`model-wide run: ${done.message}`);
      s.check(h.fake.chatRequests().length === chats + 1, `one model request for the one hot module (saw ${h.fake.chatRequests().length - chats})`);
      s.check(!h.readWorkspaceFile(BLOCKS_FILE).includes(M.rewritten), "blocks.py is untouched before Accept");
      await wb.waitForCodeLens(M.accept, 20_000);
      await s.shot("k-model-wide-offer");
      await wb.clickCodeLens(M.accept);
      // blocks.py is not open: the edit goes to its model, and autosave writes it
      await until("blocks.py on disk to hold the rewritten class", async () =>
        h.readWorkspaceFile(BLOCKS_FILE).includes(M.rewritten) || undefined, { timeoutMs: 30_000, intervalMs: 500 }).catch(async () => {
        await wb.runCommand("File: Save All");
        await until("blocks.py saved", async () => h.readWorkspaceFile(BLOCKS_FILE).includes(M.rewritten) || undefined, { timeoutMs: 10_000 });
      });
      const rewritten = h.readWorkspaceFile(BLOCKS_FILE);
      s.check(count(rewritten, "class SlowBlock(") === 1 && count(rewritten, M.rewritten) === 1, "the class is rewritten once, keeping its name");
      const py = process.env.FORGE_PYTHON || path.join(REPO, ".venv", "bin", "python");
      const probe = JSON.parse(execFileSync(py, ["-c", PROBE, h.workspace], { encoding: "utf8", timeout: 300_000 }).trim().split("\n").pop() ?? "{}");
      s.check(probe.forge === "[True, True]", `the file on disk runs forge's answer in both blocks (${JSON.stringify(probe)})`);
      s.check(probe.original === "[False, False]", `FORGE_DISABLE=1 runs the original (${JSON.stringify(probe)})`);
      s.check(typeof probe.max_abs === "number" && probe.max_abs <= 1e-5, `the outputs match the original's (${JSON.stringify(probe)})`);
      await wb.waitForCodeLens(M.undo, 20_000);
      await s.shot("k-model-wide-accepted");
      await wb.clickCodeLens(M.undo);
      await until("blocks.py back to the original on disk", async () => h.readWorkspaceFile(BLOCKS_FILE) === BLOCKS || undefined,
        { timeoutMs: 30_000, intervalMs: 500 }).catch(async () => {
        await wb.runCommand("File: Save All");
        await until("blocks.py saved", async () => h.readWorkspaceFile(BLOCKS_FILE) === BLOCKS || undefined, { timeoutMs: 10_000 });
      });
      s.check(h.readWorkspaceFile(BLOCKS_FILE) === BLOCKS, "Undo put blocks.py back as it was, in one action");
    });

    // ---------------------------------------------------------------------------------------------
    await h.step(t, "j-no-errors-in-logs", async (s) => {
      // give the last log lines a moment to be flushed by the extension host (condition: file sizes stable)
      let sizes = "";
      await until("the log files to stop growing", () => {
        const now = logFiles(h.userDataDir).all.map((f) => `${f}:${fs.statSync(f).size}`).join(",");
        const stable = now === sizes;
        sizes = now;
        return stable;
      }, { timeoutMs: 10_000, intervalMs: 1000 }).catch(() => s.note("the log files kept growing; checked them as they were"));
      const { problems, allowed } = applyPolicy(h.userDataDir, h.console.problems);
      for (const a of allowed) s.note(`allowed noise [${a.source}] (${a.why}): ${a.text.split("\n")[0].slice(0, 200)}`);
      const forgeErrors = logFiles(h.userDataDir).forge.flatMap((f) => errorEntries(f));
      const infoAsError = serverInfoAsErrors(forgeErrors);
      s.check(infoAsError.length === 0, `server INFO/DEBUG lines tagged [error] in the Forge channel: ${infoAsError.length}, e.g.\n${infoAsError.slice(0, 5).join("\n")}`);
      s.check(problems.length === 0, `error-level lines (logs / browser console), none allowlisted:\n${formatProblems(problems)}`);
      const leaked = logFiles(h.userDataDir).all.filter((f) => fs.readFileSync(f, "utf8").includes(h.apiKey));
      s.check(leaked.length === 0, `the API key appears in no log (${leaked.join(", ")})`);
      const forgeLog = logFiles(h.userDataDir).forge.map((f) => fs.readFileSync(f, "utf8")).join("\n");
      s.check(UI.serverJobLine.test(forgeLog), `the server's own log lines reach the Forge channel (${UI.serverJobLine})`);
      s.check(UI.serverJobEndLine.test(forgeLog), `runs' ends are logged at INFO (${UI.serverJobEndLine})`);
      const aboutForgeFolder = forgeLog.split("\n").filter((l) => UI.forgeFolderWarning.test(l));
      s.check(aboutForgeFolder.length === 0, `no warnings about forge's own .forge/ folder:\n${aboutForgeFolder.slice(0, 5).join("\n")}`);
      const crashes = forgeLog.split("\n").filter((l) => UI.crashed.test(l));
      s.check(crashes.length === 0, `no crash/restart lines in the Forge channel:\n${crashes.slice(0, 5).join("\n")}`);
    });
  } finally {
    await h.finish();
  }
  const failed = h.steps.filter((x) => x.status === "failed").map((x) => x.name);
  assert.deepEqual(failed, [], `failed steps: ${failed.join(", ")} (details above and in ${path.relative(REPO, h.artifacts)}/summary.md)`);
});
