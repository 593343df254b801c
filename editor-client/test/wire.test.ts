// The REAL forge-lsp server driven from node over stdio (vscode-jsonrpc), with a scripted
// OpenAI-compatible server in node, through optimize -> accept (mirrors tests/test_server_e2e.py),
// and through the protocol the inline review uses (the proposal from forge/runs, the review in a
// document of its own while the file is untouched, reject recorded, accept through forge.accept). The settings, environment, message
// parsers, review state machine, runs model and run-store reader used here are the extension's.
//
// Python: $FORGE_PYTHON, else <repo>/.venv/bin/python, else python3 (it must import forge_lsp).

import { after, before, describe, test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "fs";
import * as os from "os";
import * as path from "path";
import { configurationAnswer, initializationOptions, serverEnv } from "../src/config";
import { candidateArgs, parseAccept, parseCandidateArgs, parseReject, parseRuns, parseShowDiff, parseStart, PROPOSAL_CODE, ShowDiff } from "../src/protocol";
import { applyEdits, minimalEdit, ReviewSession } from "../src/review/session";
import { parseRunDetails } from "../src/runs/details";
import { parseReportResult, reportArgs, reportWebviewHtml } from "../src/runs/report";
import { rootNodes, statusBar } from "../src/runs/model";
import { FakeOpenAI } from "./support/fakeOpenAI";
import { cannotRun, Doc, pathToUri, positionAt, serverPython, TestClient, until } from "./support/lspClient";

const REPO = path.resolve(__dirname, "..", "..", "..");
const TASK = fs.readFileSync(path.join(REPO, "tests", "fixtures", "slow_softmax.py"), "utf8");
// vectorized: faster than the row-at-a-time reference on the CPU, so the run ends with a proposal
const FAST = `
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
`;
const SECRET = "sk-wire-test-0123456789abcdef";
const PYTHON = serverPython();

function coder(source: string, summary: string): string {
  return JSON.stringify({ summary, source });
}

/** The extension's settings, as VS Code would return them for this workspace. */
function settings(baseUrl: string): (key: string) => unknown {
  const values: Record<string, unknown> = {
    model: "scripted", baseUrl, device: "cpu", search: "linear", rounds: 1, offline: false, profile: false,
    interpreter: PYTHON, diffMode: "inline", logLevel: "INFO", apiKeyEnv: "OPENAI_API_KEY",
  };
  return (key) => values[key];
}

describe("wire: the real forge-lsp server", { timeout: 600_000 }, () => {
  let fake: FakeOpenAI;
  let client: TestClient;
  let ws: string;
  let cache: string;

  before(async () => {
    const why = cannotRun(PYTHON);
    assert.equal(why, null, `${why}\nSet FORGE_PYTHON to a Python with forge-lsp installed (CI: ../.venv from ./dev setup).`);
    fake = await new FakeOpenAI().start();
    ws = fs.mkdtempSync(path.join(os.tmpdir(), "forge-wire-ws-"));
    cache = fs.mkdtempSync(path.join(os.tmpdir(), "forge-wire-cache-"));
    const get = settings(fake.baseUrl);
    // the server's environment, built like the extension builds it: the stored key goes in
    // OPENAI_API_KEY; one intra-op thread (a loaded 2-core box wakes a pool slowly)
    const env = serverEnv({
      base: { PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin", HOME: os.homedir() },
      apiKey: SECRET,
      get,
      extra: { OMP_NUM_THREADS: "1", FORGE_CACHE_DIR: cache, FORGE_LSP_LOG: path.join(cache, "server.log") },
    });
    client = new TestClient(PYTHON, env, ws);
    client.configuration = (section) => configurationAnswer(section, get) ?? null;
    const init = await client.initialize(pathToUri(ws), initializationOptions(get));
    const commands: string[] = init.capabilities.executeCommandProvider.commands;
    for (const c of ["forge.optimize", "forge.accept", "forge.reject", "forge.showDiff", "forge.cancel"]) assert.ok(commands.includes(c), c);
  });

  after(async () => {
    await client?.shutdown();
    await fake?.close();
    for (const d of [ws, cache]) if (d) fs.rmSync(d, { recursive: true, force: true });
  });

  function proposal(uri: string): any {
    return (client.diagnostics.get(uri) ?? []).find((d) => d.code === PROPOSAL_CODE);
  }

  /** Optimize `Model` in a fresh copy of the task; returns its doc once the proposal diagnostic is there. */
  async function optimize(name: string, marker: string): Promise<{ doc: Doc; job: string; file: string }> {
    const file = path.join(ws, `${name}.py`);
    fs.writeFileSync(file, TASK);
    const doc = await client.open(file);
    fake.script(coder(FAST + `\n# ${marker}\n`, `vectorized softmax (${marker})`));
    const started = parseStart(await client.command("forge.optimize", [doc.uri, "Model"]));
    assert.ok("job" in started, JSON.stringify(started));
    const diag = await until(() => proposal(doc.uri), 180_000, `the ${PROPOSAL_CODE} diagnostic\n${client.stderr.slice(-3000)}`);
    assert.equal(diag.source, "forge");
    assert.match(diag.message, /faster candidate/);
    return { doc, job: started.job, file };
  }

  async function candidateLens(uri: string, command: string): Promise<string[]> {
    const lenses = await client.codeLenses(uri);
    const lens = lenses.find((l) => l.command?.command === command);
    assert.ok(lens, `a ${command} lens in ${JSON.stringify(lenses.map((l) => l.command?.command))}`);
    const ref = parseCandidateArgs(lens.command.arguments);
    assert.ok(ref, "four string arguments");
    return candidateArgs(ref);
  }

  test("initialize: settings come from initializationOptions and workspace/configuration, without complaints or secrets", async () => {
    await until(() => client.configurationRequests.length > 0, 10_000, "workspace/configuration");
    assert.deepEqual(client.configurationRequests[0].items.map((i: any) => i.section), ["forge"]);
    const sent = JSON.stringify(client.sentInitialize);
    assert.ok(!sent.includes(SECRET), "the key is not in initialize");
    const complaints = client.messages.filter((m) => /unknown setting|is invalid|ignored/.test(m.message));
    assert.deepEqual(complaints, []);
  });

  test("optimize -> progress -> faster-candidate diagnostic -> lens -> accept applies the versioned edit", async () => {
    const { doc, job, file } = await optimize("softmax_accept", "wire accept");
    const token = `forge/${job}`;
    await until(() => client.progress.get(token)?.some((v) => v.kind === "end"), 30_000, "progress end");
    const kinds = client.progress.get(token)!.map((v) => v.kind);
    assert.equal(kinds[0], "begin");
    assert.equal(kinds[kinds.length - 1], "end");
    assert.ok(kinds.includes("report"));

    // forge/runs, through the extension's parser and tree model
    const jobs = parseRuns(await client.conn.sendRequest("forge/runs", null));
    const mine = jobs.find((j) => j.id === job);
    assert.ok(mine && mine.status === "done" && mine.kind === "optimize" && mine.runId, JSON.stringify(mine));
    const groups = rootNodes(jobs);
    assert.ok(groups.some((g) => g.id === "done" && g.jobs.some((j) => j.id === job)));
    assert.equal(statusBar(jobs), null, "nothing active: no status-bar item");

    // the scripted model server saw the key the extension put in the environment
    const chats = fake.chatRequests();
    assert.ok(chats.length >= 1);
    assert.equal(chats[chats.length - 1].headers.authorization, `Bearer ${SECRET}`);

    const original = doc.text;
    const args = await candidateLens(doc.uri, "forge.accept");
    const result = parseAccept(await client.command("forge.accept", args));
    assert.equal(result.applied, true, result.message);
    assert.notEqual(doc.text, original);
    assert.match(doc.text, /class _ModelReference/);
    assert.equal(fs.readFileSync(file, "utf8"), original, "the editor did not save: the file on disk is untouched");
    await until(() => !proposal(doc.uri), 10_000, "the proposal cleared");

    // the run store knows the run: what the details view asks the server for (`forge/run`)
    const out = JSON.stringify(await client.request("forge/run", { runId: mine!.runId! }));
    assert.ok(!out.includes(SECRET));
    const details = parseRunDetails(out);
    assert.ok(!("error" in details), JSON.stringify(details));
    assert.equal(details.run.id, mine!.runId);
    assert.ok(details.candidates.length >= 1);
    const best = details.candidates.find((c) => c.id === details.run.best);
    assert.ok(best, "the best candidate is listed");
    assert.equal(best.verdict?.status, "correct");
    assert.ok((best.speedup ?? 0) > 1, `speedup ${best.speedup}`);
    assert.match(best.source, /wire accept/);
  });

  test("inline review, all rejected: the file's buffer is never touched and forge.reject is recorded", async () => {
    const { doc, job } = await optimize("softmax_review_reject", "wire review reject");
    const original = doc.text;
    const version = doc.version;
    // the extension finds the proposal from forge/runs (also for a file that is closed), not from lenses
    const mine = parseRuns(await client.conn.sendRequest("forge/runs", null)).find((j) => j.id === job);
    assert.ok(mine?.proposal, JSON.stringify(mine));
    const args = candidateArgs(mine.proposal);
    assert.deepEqual(args, await candidateLens(doc.uri, "forge.showDiff"));
    assert.match(mine.message, /× \(final re-timing(; search \d+\.\d\d×)?\) faster candidate found$/);
    const diff = parseShowDiff(await client.command("forge.showDiff", [...args, { show: false }])) as ShowDiff;
    assert.ok(!("error" in diff), JSON.stringify(diff));
    assert.equal(diff.original, original);
    assert.equal(diff.stale, false);
    assert.equal(diff.speedup, mine.proposal.speedup);

    // the review is a document of its own (the session's text); the file's buffer stays as it is
    const { session, edits } = ReviewSession.create(diff.original, diff.proposed, "\n");
    assert.ok(session.hunks.length >= 1);
    session.applyEvent([{ offset: 0, length: original.length, text: applyEdits(original, edits) }]);
    session.applyEvent(session.rejectAll().sort((a, b) => b.offset - a.offset));
    assert.equal(session.outcome().finished, true);
    assert.equal(session.outcome().text, original, "byte for byte");
    assert.equal(doc.version, version);

    const r = parseReject(await client.command("forge.reject", args));
    assert.equal(r.rejected, true, r.message);
    await until(() => !proposal(doc.uri), 10_000, "the proposal cleared");
    const lenses = await client.codeLenses(doc.uri);
    assert.ok(!lenses.some((l) => l.command?.command === "forge.accept"));
    const after = parseRuns(await client.conn.sendRequest("forge/runs", null)).find((j) => j.id === job);
    assert.equal(after?.decision, "rejected");
    assert.equal(after?.proposal, null);
    assert.doesNotMatch(after!.message, /found/);
  });

  test("inline review, accepted: forge.accept's versioned edit on the untouched file, the review's rest on top", async () => {
    const { doc, file } = await optimize("softmax_review_accept", "wire review accept");
    const original = doc.text;
    const args = await candidateLens(doc.uri, "forge.showDiff");
    const diff = parseShowDiff(await client.command("forge.showDiff", [...args, { show: false }])) as ShowDiff;
    const { session, edits } = ReviewSession.create(diff.original, diff.proposed, "\n");
    session.applyEvent([{ offset: 0, length: original.length, text: applyEdits(original, edits) }]);
    // the user edits the review document, outside the hunks (line 0: an import line)
    const r = session.applyEvent([{ offset: 0, length: 0, text: "# reviewed\n" }]);
    assert.equal(r.own, false);
    assert.deepEqual(r.dropped, []);
    session.applyEvent(session.acceptAll().sort((a, b) => b.offset - a.offset));
    const final = session.outcome().text;
    assert.equal(final, "# reviewed\n" + diff.proposed);

    // finalize as the extension does: forge.accept; the server's edit carries the file's current version
    let editVersion: number | null = null;
    client.applyEdit = async (params) => {
      editVersion = params.edit.documentChanges[0].textDocument.version;
      return client.defaultApplyEdit(params);
    };
    try {
      const result = parseAccept(await client.command("forge.accept", args));
      assert.equal(result.applied, true, result.message);
    } finally {
      client.applyEdit = (p) => client.defaultApplyEdit(p);
    }
    assert.equal(editVersion, 1, "the version the editor had: nothing else touched the file during the review");
    assert.equal(doc.text, diff.proposed, "the server's edit gives exactly the reviewed proposal");
    // the user's own edit in the review goes on top (one minimal edit to the review's result)
    const rest = minimalEdit(doc.text, final);
    assert.equal(rest.length, 1);
    const now = doc.text;
    await client.edit(doc.uri, rest.map((e) => ({ range: { start: positionAt(now, e.offset), end: positionAt(now, e.offset + e.length) }, newText: e.text })));
    assert.equal(doc.text, final);
    assert.equal(fs.readFileSync(file, "utf8"), original, "nothing was written to disk");
    await until(() => !proposal(doc.uri), 10_000, "the proposal cleared");
  });

  test("cancel: forge.cancel stops a running optimize and forge/runs says cancelled", async () => {
    const file = path.join(ws, "softmax_cancel.py");
    fs.writeFileSync(file, TASK);
    const doc = await client.open(file);
    fake.script({ delay: 30, content: coder(FAST, "slow") });
    const started = parseStart(await client.command("forge.optimize", [doc.uri, "Model"]));
    assert.ok("job" in started);
    await until(() => client.progress.get(`forge/${started.job}`)?.length, 30_000, "progress begin");
    const active = parseRuns(await client.conn.sendRequest("forge/runs", null));
    assert.ok(statusBar(active)?.text.includes("optimize Model"), JSON.stringify(statusBar(active)));
    const cancelled = await client.command("forge.cancel", [started.job]);
    assert.deepEqual(cancelled.cancelled, [started.job]);
    await until(() => client.progress.get(`forge/${started.job}`)?.some((v) => v.kind === "end"), 20_000, "progress end");
    const jobs = parseRuns(await client.conn.sendRequest("forge/runs", null));
    assert.equal(jobs.find((j) => j.id === started.job)?.status, "cancelled");
  });

  test("the run view's full report: forge.openReport writes it, the webview gets it with a fresh nonce", async () => {
    const jobs = parseRuns(await client.conn.sendRequest("forge/runs", null));
    const runId = jobs.find((j) => j.runId)?.runId;
    assert.ok(runId, "a run in the store");
    const result = parseReportResult(await client.command("forge.openReport", reportArgs(runId)));
    assert.ok(!("error" in result), JSON.stringify(result));
    assert.equal(result.runId, runId);
    assert.equal(path.dirname(result.path), path.join(ws, ".forge", "reports"));
    const html = reportWebviewHtml(fs.readFileSync(result.path, "utf8"), "freshNonce123");
    assert.equal(typeof html, "string");
    assert.match(html as string, /script-src &#39;nonce-freshNonce123&#39;/);
    assert.ok((html as string).includes(`<script nonce="freshNonce123">`) && (html as string).includes(runId));
    // the same page on 127.0.0.1, with the session's token only
    const url = new URL(result.url ?? "");
    assert.equal(url.hostname, "127.0.0.1");
    assert.equal((await fetch(url)).status, 200);
    url.search = "";
    assert.equal((await fetch(url)).status, 403);
    const missing = parseReportResult(await client.command("forge.openReport", reportArgs("nosuchrun")));
    assert.ok("error" in missing && /no run/.test(missing.error));
  });

  test("nothing the server sent or logged carries the key", () => {
    assert.ok(!JSON.stringify(client.messages).includes(SECRET));
    assert.ok(!client.stderr.includes(SECRET));
    const log = path.join(cache, "server.log");
    if (fs.existsSync(log)) assert.ok(!fs.readFileSync(log, "utf8").includes(SECRET));
  });
});
