import { test } from "node:test";
import * as assert from "node:assert/strict";
import { Job } from "../src/protocol";
import {
  applyProgress, detailNodes, fileName, formatDuration, newlyFinished, pollDelayMs, rootNodes, runNode, sortJobs, statusBar,
} from "../src/runs/model";

function job(id: string, status: Job["status"], extra: Partial<Job> = {}): Job {
  return { id, kind: "optimize", uri: "file:///w/my%20mod.py", target: "Model", title: `forge: optimize Model`, status, message: "",
    started: 1000, finished: status === "running" || status === "queued" ? null : 1100, runId: null, percentage: 0,
    proposal: null, decision: null, ...extra };
}

test("groups: running, done, failed/cancelled; empty groups are left out", () => {
  const jobs = [job("a", "done"), job("b", "running"), job("c", "failed"), job("d", "cancelled"), job("e", "queued")];
  const groups = rootNodes(jobs);
  assert.deepEqual(groups.map((g) => g.id), ["active", "done", "failed"]);
  assert.deepEqual(groups[0].jobs.map((j) => j.id).sort(), ["b", "e"]);
  assert.match(groups[2].label, /\(2\)/);
  assert.deepEqual(rootNodes([job("a", "done")]).map((g) => g.id), ["done"]);
  assert.deepEqual(rootNodes([]), []);
});

test("order: active oldest first, finished newest first", () => {
  const sorted = sortJobs([
    job("old-done", "done", { finished: 10 }), job("new-done", "done", { finished: 20 }),
    job("late", "running", { started: 50 }), job("early", "running", { started: 5 }),
  ]);
  assert.deepEqual(sorted.map((j) => j.id), ["early", "late", "new-done", "old-done"]);
});

test("run nodes: label, description with progress and time, icon and context for menus", () => {
  const n = runNode(job("b", "running", { percentage: 30, message: "round 3/10 · best 1.42×", started: 1000 }), 1065);
  assert.equal(n.label, "optimize Model · my mod.py"); // which file: every module may be called Model
  assert.equal(n.description, "30% · round 3/10 · best 1.42× · 1 min 5 s");
  assert.equal(n.icon, "sync~spin");
  assert.equal(n.contextValue, "forgeRun.active");
  assert.match(n.tooltip, /file: my mod\.py/);
  const done = runNode(job("a", "done", { message: "1.42× faster candidate found", runId: "r1" }), 5000);
  assert.equal(done.icon, "pass");
  assert.equal(done.contextValue, "forgeRun.done");
  assert.match(done.description, /1 min 40 s$/);
  assert.equal(runNode(job("c", "cancelled"), 0).icon, "circle-slash");
  // after a decision the row says what became of the candidate (the server's message), with its own icon
  const rejected = runNode(job("r", "done", { message: "candidate r1/c2 (1.45× (final re-timing)) rejected", decision: "rejected" }), 5000);
  assert.equal(rejected.icon, "close");
  assert.match(rejected.description, /^candidate r1\/c2 \(1\.45× \(final re-timing\)\) rejected/);
  assert.equal(runNode(job("a", "done", { decision: "accepted" }), 0).icon, "check");
  const details = detailNodes(job("a", "done", { message: "m", runId: "r1" }), 0);
  assert.deepEqual(details.map((d) => d.label), ["status", "message", "file", "run", "job", "time"]);
});

test("status bar: the oldest active run with its progress; hidden when none is active", () => {
  assert.equal(statusBar([job("a", "done")]), null);
  const one = statusBar([job("b", "running", { percentage: 40, message: "verifying" })]);
  assert.equal(one?.text, "$(sync~spin) forge: optimize Model 40% · verifying");
  const two = statusBar([job("b", "running", { started: 1 }), job("c", "queued", { started: 2, kind: "profile", target: "K" })]);
  assert.match(two!.text, /\(\+1\)$/);
  assert.match(two!.tooltip, /forge: optimize Model: running/);
  assert.equal(two!.jobId, "b");
});

test("progress between polls updates the job", () => {
  const jobs = [job("b", "queued"), job("c", "running")];
  const next = applyProgress(jobs, "b", { kind: "begin", message: "starting", percentage: 0 });
  assert.equal(next[0].status, "running");
  const rep = applyProgress(next, "b", { kind: "report", message: "round 1/10", percentage: 10.4 });
  assert.equal(rep[0].message, "round 1/10");
  assert.equal(rep[0].percentage, 10);
  assert.equal(rep[1], jobs[1], "other jobs untouched");
});

test("polling: while active only, backing off after failures", () => {
  assert.equal(pollDelayMs([job("a", "done")]), null);
  assert.equal(pollDelayMs([job("a", "running")]), 1000);
  assert.equal(pollDelayMs([job("a", "running")], 2), 4000);
  assert.equal(pollDelayMs([job("a", "running")], 10), 10_000);
});

test("newly finished runs are announced once", () => {
  const before = [job("a", "running"), job("b", "done")];
  const after = [job("a", "done"), job("b", "done"), job("c", "failed")];
  assert.deepEqual(newlyFinished(before, after).map((j) => j.id), ["a"]);
  assert.deepEqual(newlyFinished(after, after), []);
});

test("helpers", () => {
  assert.equal(fileName("file:///a/b/c%20d.py"), "c d.py");
  assert.equal(formatDuration(5), "5 s");
  assert.equal(formatDuration(3725), "1 h 2 min");
  assert.equal(formatDuration(-1), "");
});
