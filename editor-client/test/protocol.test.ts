import { test } from "node:test";
import * as assert from "node:assert/strict";
import {
  candidateArgs, isActive, jobIdOfToken, parseAccept, parseCandidateArgs, parseJob, parseProgress, parseReject, parseRuns,
  parseShowDiff, parseStart, parseTargetArgs, showDiffArgs, speedupLabel,
} from "../src/protocol";

const JOB = { id: "optimize-3", kind: "optimize", uri: "file:///w/m.py", target: "Model", title: "forge: optimize Model",
  status: "running", message: "round 1/10 · verifying", started: 100.5, finished: null, runId: "20261129-1-abc", percentage: 10,
  proposal: null, decision: null };

test("forge/runs replies parse into jobs; malformed entries are dropped", () => {
  const jobs = parseRuns({ runs: [JOB, { nope: 1 }, null, { ...JOB, id: "x", status: "weird", percentage: 250 }] });
  assert.equal(jobs.length, 2);
  assert.deepEqual(jobs[0], JOB);
  assert.equal(jobs[1].status, "failed");
  assert.equal(jobs[1].percentage, 100);
  assert.deepEqual(parseRuns(null), []);
  assert.deepEqual(parseRuns({ runs: "no" }), []);
  assert.equal(parseJob({ id: 3 }), null);
  assert.equal(isActive(jobs[0]), true);
});

test("a finished job carries its open proposal (the four candidate arguments and both speedups) and its decision", () => {
  const proposal = { uri: "file:///w/m.py", className: "Model", runId: "r1", candidateId: "r1/c2", speedup: 1.45,
    searchSpeedup: 1.42, summary: "vectorized" };
  const [done] = parseRuns({ runs: [{ ...JOB, status: "done", proposal }] });
  assert.deepEqual(done.proposal, proposal);
  assert.deepEqual(parseCandidateArgs(candidateArgs(done.proposal!)), { uri: "file:///w/m.py", className: "Model", runId: "r1", candidateId: "r1/c2" });
  const [rejected] = parseRuns({ runs: [{ ...JOB, status: "done", decision: "rejected" }] });
  assert.equal(rejected.decision, "rejected");
  assert.equal(rejected.proposal, null);
  const [bad] = parseRuns({ runs: [{ ...JOB, proposal: { uri: "u", className: "M" }, decision: "maybe" }] });
  assert.equal(bad.proposal, null);
  assert.equal(bad.decision, null);
});

test("speedups are said one way: the final re-timing, then the search's when it differs", () => {
  assert.equal(speedupLabel(14.34, 14.27), "14.34× (final re-timing; search 14.27×)");
  assert.equal(speedupLabel(1.5, 1.499), "1.50× (final re-timing)");
  assert.equal(speedupLabel(2), "2.00× (final re-timing)");
});

test("candidate and target arguments, flat or wrapped once", () => {
  const ref = { uri: "file:///a.py", className: "Model", runId: "r1", candidateId: "r1/c3" };
  assert.deepEqual(parseCandidateArgs(candidateArgs(ref)), ref);
  assert.deepEqual(parseCandidateArgs([candidateArgs(ref)]), ref);
  // the texts-only form this extension sends to forge.showDiff still names the same candidate
  assert.deepEqual(showDiffArgs(ref).slice(4), [{ show: false }]);
  assert.deepEqual(parseCandidateArgs(showDiffArgs(ref)), ref);
  assert.equal(parseCandidateArgs(["a", "b", "c"]), null);
  assert.equal(parseCandidateArgs(["a", "b", "c", 4]), null);
  assert.deepEqual(parseTargetArgs(["file:///a.py", "Model"]), { uri: "file:///a.py", name: "Model" });
  assert.equal(parseTargetArgs(["file:///a.py"]), null);
});

test("forge.showDiff replies", () => {
  const ok = parseShowDiff({ original: "a\n", proposed: "b\n", diff: "@@", speedup: 1.5, searchSpeedup: 1.4, summary: "s", stale: false });
  assert.deepEqual(ok, { original: "a\n", proposed: "b\n", diff: "@@", speedup: 1.5, searchSpeedup: 1.4, summary: "s", stale: false });
  assert.deepEqual(parseShowDiff({ error: "no such proposal" }), { error: "no such proposal" });
  assert.ok("error" in parseShowDiff({ original: "a" }));
  assert.ok("error" in parseShowDiff(undefined));
});

test("accept, reject and start replies", () => {
  assert.deepEqual(parseAccept({ applied: true, uri: "u", candidate: "c" }), { applied: true, message: "" });
  assert.deepEqual(parseAccept({ applied: false, message: "changed" }), { applied: false, message: "changed" });
  assert.equal(parseAccept(null).applied, false);
  assert.deepEqual(parseReject({ rejected: true }), { rejected: true, message: "" });
  assert.deepEqual(parseStart({ job: "optimize-1" }), { job: "optimize-1" });
  assert.deepEqual(parseStart({ error: "busy" }), { error: "busy" });
  assert.ok("error" in parseStart(42));
});

test("progress tokens and values", () => {
  assert.equal(jobIdOfToken("forge/optimize-7"), "optimize-7");
  assert.equal(jobIdOfToken("other/x"), null);
  assert.equal(jobIdOfToken(5), null);
  assert.deepEqual(parseProgress({ kind: "report", message: "m", percentage: 30, cancellable: true }), { kind: "report", message: "m", percentage: 30 });
  assert.deepEqual(parseProgress({ kind: "begin", title: "t" }), { kind: "begin", title: "t" });
  assert.equal(parseProgress({ kind: "middle" }), null);
});
