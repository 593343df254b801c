import { test } from "node:test";
import * as assert from "node:assert/strict";
import { contentSecurityPolicy, escapeHtml, makeNonce, parseRunDetails, plural, renderDetailsHtml } from "../src/runs/details";
import { Job } from "../src/protocol";

const JOB: Job = { id: "optimize-1", kind: "optimize", uri: "file:///w/m.py", target: "Model", title: "forge: optimize Model",
  status: "done", message: "1.45× (final re-timing; search 1.42×) faster candidate found", started: 1, finished: 2, runId: "r1",
  percentage: 100, proposal: null, decision: null };

const STORE_JSON = JSON.stringify({
  run: { id: "r1", status: "done", message: "rounds exhausted", task: "/w/.forge/snapshots/m.py", modelClass: "Model", best: "r1/c2",
    created: 1, updated: 2, spentUsd: 0.0012, tokensIn: 100, tokensOut: 20,
    final: { candidate: "r1/c2", speedup: 1.45, ci95: [1.4, 1.5], referenceMs: 0.5, candidateMs: 0.345 } },
  candidates: [
    { id: "r1/c1", parent: null, origin: "coder", summary: "<script>alert(1)</script>", status: "evaluated", speedup: null, correct: false,
      verdict: { status: "incorrect", reason: "values differ", failedCheck: "outputs_match", backend: "torch", device: "cpu",
        referenceMs: 0.5, candidateMs: null, speedup: null, ci95: null, timingMode: null,
        checks: [{ name: "outputs_match", passed: false, detail: "max abs 1.0" }] },
      findings: [], source: "class ModelNew: pass  # </pre><img src=x onerror=alert(1)>" },
    { id: "r1/c2", parent: "r1/c1", origin: "coder", summary: "vectorized", status: "evaluated", speedup: 1.42, correct: true,
      verdict: { status: "correct", reason: "", failedCheck: null, backend: "torch", device: "cpu", referenceMs: 0.5,
        candidateMs: 0.352, speedup: 1.42, ci95: [1.3, 1.5], timingMode: "cpu", checks: [{ name: "outputs_match", passed: true, detail: "" }] },
      findings: [{ title: "memory-bound", rule: "roofline", suggestion: "fuse" }], source: "class ModelNew: ..." },
  ],
});

test("a forge/run reply parses; errors come through", () => {
  const d = parseRunDetails("warning on stdout\n" + STORE_JSON + "\n");
  assert.ok(!("error" in d));
  assert.equal(d.candidates.length, 2);
  assert.deepEqual(d.candidates[1].verdict?.ci95, [1.3, 1.5]);
  assert.equal(d.candidates[1].findings[0].title, "memory-bound");
  assert.deepEqual(parseRunDetails('{"error": "no run \'x\'"}'), { error: "no run 'x'" });
  assert.ok("error" in parseRunDetails("Traceback"));
});

test("the page escapes the server's text, has a strict CSP, loads nothing, and only nonce'd code runs", () => {
  const d = parseRunDetails(STORE_JSON);
  assert.ok(!("error" in d));
  const nonce = "abc123";
  const html = renderDetailsHtml({ job: JOB, file: "m.py", details: d, proposal: { candidateId: "r1/c2", speedup: 1.45, searchSpeedup: 1.42,
    summary: "s<b>", diff: "-a\n+b", stale: false }, actions: true }, nonce);
  assert.ok(!html.includes("<script>alert"), "summaries are escaped");
  assert.ok(!html.includes("<img"), "sources are escaped");
  assert.match(html, /&lt;script&gt;alert\(1\)&lt;\/script&gt;/);
  const csp = html.match(/Content-Security-Policy" content="([^"]+)"/)![1];
  assert.equal(csp, contentSecurityPolicy(nonce));
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /script-src 'nonce-abc123'/);
  assert.match(csp, /connect-src 'none'/);
  assert.ok(!/https?:\/\//.test(html), "no URL anywhere in the page");
  assert.ok(!/<[^>]*\ssrc=/.test(html), "no src attributes");
  assert.ok(!/<[^>]*\sstyle="/.test(html), "no inline style attributes (blocked by the CSP anyway)");
  assert.ok(!/<[^>]*\son[a-z]+=/.test(html), "no inline event handlers");
  const scripts = html.match(/<script[^>]*>/g) ?? [];
  assert.equal(scripts.length, 1);
  assert.equal(scripts[0], `<script nonce="${nonce}">`);
  const styles = html.match(/<style[^>]*>/g) ?? [];
  assert.deepEqual(styles, [`<style nonce="${nonce}">`]);
  assert.match(html, /1\.42×/);
  assert.match(html, /352\.0 µs/);
  assert.match(html, /outputs_match: values differ/);
  assert.match(html, /r1\/c2|c2 ★/);
  assert.match(html, /memory-bound/);
});

test("without actions or a run there is no script at all; missing candidates say why", () => {
  const html = renderDetailsHtml({ job: JOB, file: "m.py", detailsError: "no run store at /w/.forge/runs.sqlite" }, "n");
  assert.ok(!html.includes("Accept") && html.includes('data-command="report"')); // a run: only its report's button
  assert.match(html, /Candidates are not available: no run store/);
  const profile = renderDetailsHtml({ job: { ...JOB, kind: "profile", runId: null }, file: "m.py" }, "n");
  assert.match(profile, /profile jobs keep none/);
  assert.ok(!profile.includes("<script"));
});

test("escapeHtml and nonces", () => {
  assert.equal(escapeHtml(`<a href="x">'&'</a>`), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  const n = makeNonce((k) => new Uint8Array(k).fill(251));
  assert.match(n, /^[A-Za-z0-9_-]+$/);
  assert.equal(n.length, 22);
});

test("the page says which speedup is the final re-timing and which the search's, counts in words, and names the file by its path", () => {
  const d = parseRunDetails(STORE_JSON);
  assert.ok(!("error" in d));
  assert.deepEqual(d.run.final, { candidate: "r1/c2", speedup: 1.45, ci95: [1.4, 1.5], referenceMs: 0.5, candidateMs: 0.345 });
  const html = renderDetailsHtml({ job: JOB, file: "models/m.py", details: d, proposal: { candidateId: "r1/c2", speedup: 1.45,
    searchSpeedup: 1.42, summary: "s", diff: "", stale: false }, actions: true }, "n");
  assert.match(html, /Proposed candidate r1\/c2: 1\.45× \(final re-timing; search 1\.42×\)/);
  assert.match(html, /Final re-timing of c2: <b>1\.45× \(final re-timing; search 1\.42×\)<\/b> \[1\.40, 1\.50\]/);
  assert.match(html, /<th>speedup \(search\)<\/th>/);
  assert.match(html, /1\.42× <span class="muted">\[1\.30, 1\.50\]<\/span>/); // the search's own number, in the search column
  assert.match(html, /<th>file<\/th><td>models\/m\.py<\/td>/);
  assert.ok(!html.includes("file:///"), "no URI shown as the file");
  assert.match(html, / · 2 candidates · /);
  const one = parseRunDetails(JSON.stringify({ ...JSON.parse(STORE_JSON), candidates: [JSON.parse(STORE_JSON).candidates[1]] }));
  assert.ok(!("error" in one));
  assert.match(renderDetailsHtml({ job: JOB, file: "m.py", details: one }, "n"), / · 1 candidate · /);
  assert.equal(plural(0, "candidate"), "0 candidates");
});
