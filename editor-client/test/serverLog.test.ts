import { test } from "node:test";
import * as assert from "node:assert/strict";
import { ServerLogParser } from "../src/serverLog";

test("server log lines keep their own level; continuation lines belong to the record above", () => {
  const p = new ServerLogParser();
  assert.deepEqual(p.line("2026-12-01 10:00:00,123 INFO forge_lsp.server: job optimize-1 started: forge: optimize Model"),
    { level: "info", text: "forge_lsp.server: job optimize-1 started: forge: optimize Model" });
  assert.equal(p.line("2026-12-01 10:00:01,000 DEBUG pygls: x").level, "debug");
  assert.equal(p.line("2026-12-01 10:00:02,000 WARNING forge_lsp.server: slow").level, "warn");
  assert.equal(p.line("2026-12-01 10:00:03,000 ERROR forge_lsp.server: job failed").level, "error");
  assert.deepEqual(p.line("Traceback (most recent call last):"), { level: "error", text: "Traceback (most recent call last):" });
  assert.equal(p.line("2026-12-01 10:00:04,000 INFO forge_lsp.server: ok").level, "info");
  assert.equal(p.line("  a wrapped info line").level, "info");
  assert.equal(p.line("2026-12-01 10:00:05,000 CRITICAL x: y").level, "error");
});

test("anything before the first record (an interpreter that cannot start the server) is an error", () => {
  const p = new ServerLogParser();
  assert.equal(p.line("usage: forge-lsp [-h] [--stdio | --tcp]").level, "error");
  assert.equal(p.line("forge-lsp: error: unrecognized arguments: --bogus").level, "error");
});
