import { test } from "node:test";
import * as assert from "node:assert/strict";
import { parseReportResult, reportArgs, reportWebviewHtml } from "../src/runs/report";
import { renderDetailsHtml } from "../src/runs/details";
import { Job } from "../src/protocol";

const PAGE = `<!DOCTYPE html><html><head>
<meta http-equiv="Content-Security-Policy" content="default-src &#39;none&#39;; script-src &#39;nonce-OLD_n0nce&#39;; style-src &#39;nonce-OLD_n0nce&#39;; img-src data:; connect-src &#39;none&#39;; font-src &#39;none&#39;; frame-src &#39;none&#39;; form-action &#39;none&#39;; base-uri &#39;none&#39;">
<style nonce="OLD_n0nce">body{}</style></head><body><script nonce="OLD_n0nce">go()</script></body></html>`;

test("forge.openReport's arguments ask for no window/showDocument; its reply parses", () => {
  assert.deepEqual(reportArgs("r1"), ["r1", { show: false }]);
  assert.deepEqual(parseReportResult({ runId: "r1", url: "http://127.0.0.1:5/report/r1?token=t", path: "/w/.forge/reports/r1.html", file: "file:///w" }),
    { runId: "r1", url: "http://127.0.0.1:5/report/r1?token=t", path: "/w/.forge/reports/r1.html", inProgress: false });
  assert.deepEqual(parseReportResult({ error: "no run 'x'" }), { error: "no run 'x'" });
  assert.ok("error" in parseReportResult(null));
});

test("the report goes into the webview with a fresh nonce, its strict policy kept", () => {
  const html = reportWebviewHtml(PAGE, "NEW_nonce");
  assert.equal(typeof html, "string");
  assert.ok(!(html as string).includes("OLD_n0nce"));
  assert.equal((html as string).match(/NEW_nonce/g)?.length, 4);
  assert.match(html as string, /default-src &#39;none&#39;/);
});

test("a page without forge's strict policy is refused", () => {
  assert.ok(typeof reportWebviewHtml("<html><script>x()</script></html>", "n") !== "string");
  const loose = PAGE.replace("connect-src &#39;none&#39;", "connect-src https://example.com");
  assert.ok(typeof reportWebviewHtml(loose, "n") !== "string");
  const inline = PAGE.replace("script-src &#39;nonce-OLD_n0nce&#39;", "script-src &#39;nonce-OLD_n0nce&#39; &#39;unsafe-inline&#39;");
  assert.ok(typeof reportWebviewHtml(inline, "n") !== "string");
});

test("the run details offer the full report for a job with a run", () => {
  const job: Job = { id: "optimize-1", kind: "optimize", uri: "file:///w/m.py", target: "Model", title: "t", status: "running",
    message: "", started: 1, finished: null, runId: "r1", percentage: 10, proposal: null, decision: null };
  const html = renderDetailsHtml({ job, file: "m.py" }, "n0nce");
  assert.match(html, /<button data-command="report">Open the full report<\/button>/);
  assert.match(html, /<script nonce="n0nce">/);
  const none = renderDetailsHtml({ job: { ...job, runId: null }, file: "m.py" }, "n0nce");
  assert.ok(!none.includes('data-command="report"'));
});
