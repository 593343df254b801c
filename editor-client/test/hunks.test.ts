import { test } from "node:test";
import * as assert from "node:assert/strict";
import { applyHunks, computeHunks, diffOps, normalizeEol, splitLines, unifiedDiff } from "../src/review/hunks";

test("splitLines keeps terminators and handles CRLF, lone CR and a missing final newline", () => {
  assert.deepEqual(splitLines(""), []);
  assert.deepEqual(splitLines("a"), ["a"]);
  assert.deepEqual(splitLines("a\nb\n"), ["a\n", "b\n"]);
  assert.deepEqual(splitLines("a\r\nb\rc"), ["a\r\n", "b\r", "c"]);
  assert.equal(splitLines("x\n\ny").join(""), "x\n\ny");
});

test("normalizeEol", () => {
  assert.equal(normalizeEol("a\r\nb\nc\rd", "\n"), "a\nb\nc\nd");
  assert.equal(normalizeEol("a\nb\n", "\r\n"), "a\r\nb\r\n");
});

test("diffOps is a valid edit script of minimal length", () => {
  const a = ["a", "b", "c", "a", "b", "b", "a"];
  const b = ["c", "b", "a", "b", "a", "c"];
  const ops = diffOps(a, b);
  // replay the script
  const out: string[] = [];
  let i = 0;
  let j = 0;
  for (const op of ops) {
    if (op === "=") {
      assert.equal(a[i], b[j]);
      out.push(a[i]);
      i++;
      j++;
    } else if (op === "-") i++;
    else out.push(b[j++]);
  }
  assert.deepEqual(out, b);
  assert.equal(ops.filter((o) => o !== "=").length, 5); // Myers' example: D = 5
});

test("no hunks for equal texts; one hunk per changed region", () => {
  assert.deepEqual(computeHunks("a\nb\n", "a\nb\n"), []);
  const hunks = computeHunks("a\nb\nc\nd\ne\n", "a\nB\nc\nd\nE\nF\n");
  assert.equal(hunks.length, 2);
  assert.deepEqual(hunks[0], { origStart: 1, origEnd: 2, propStart: 1, propEnd: 2, removed: ["b\n"], added: ["B\n"] });
  assert.deepEqual(hunks[1], { origStart: 4, origEnd: 5, propStart: 4, propEnd: 6, removed: ["e\n"], added: ["E\n", "F\n"] });
});

test("pure insertions and deletions, at the start and the end", () => {
  const ins = computeHunks("a\nb\n", "x\na\nb\ny\n");
  assert.equal(ins.length, 2);
  assert.deepEqual(ins[0].removed, []);
  assert.deepEqual(ins[0].added, ["x\n"]);
  assert.deepEqual(ins[1].added, ["y\n"]);
  const del = computeHunks("a\nb\nc\n", "b\n");
  assert.equal(del.length, 2);
  assert.deepEqual(del.map((h) => h.removed), [["a\n"], ["c\n"]]);
});

test("a final line without a newline is a difference", () => {
  const h = computeHunks("a\nb", "a\nb\n");
  assert.equal(h.length, 1);
  assert.deepEqual(h[0].removed, ["b"]);
  assert.deepEqual(h[0].added, ["b\n"]);
});

test("applyHunks: all hunks give the proposal, none the original, any subset is consistent", () => {
  const o = "import torch\nclass Model:\n    def f(self):\n        return 1\n\nx = 1\n";
  const p = "import torch\nimport triton\nclass _ModelReference:\n    def f(self):\n        return 1\n\nclass Model(_ModelReference):\n    pass\nx = 1\n";
  const hunks = computeHunks(o, p);
  assert.ok(hunks.length >= 2);
  assert.equal(applyHunks(o, hunks), p);
  assert.equal(applyHunks(o, []), o);
  for (let k = 0; k < hunks.length; k++) {
    const one = applyHunks(o, [hunks[k]]);
    assert.notEqual(one, o);
  }
});

test("random texts: applying every hunk reproduces the proposal exactly", () => {
  let seed = 7;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const alphabet = ["a\n", "b\n", "c\n", "d\r\n", "", "e"];
  for (let trial = 0; trial < 300; trial++) {
    const gen = () => Array.from({ length: Math.floor(rnd() * 12) }, () => alphabet[Math.floor(rnd() * 4)]).join("") +
      (rnd() < 0.3 ? "z" : "");
    const o = gen();
    const p = gen();
    const hunks = computeHunks(o, p);
    assert.equal(applyHunks(o, hunks), p, JSON.stringify({ o, p }));
    for (let i = 1; i < hunks.length; i++) assert.ok(hunks[i].origStart > hunks[i - 1].origEnd, "hunks are separated");
  }
});

test("unifiedDiff renders headers and +/- lines", () => {
  const d = unifiedDiff("a\nb\nc\n", "a\nB\nc\n", 1);
  assert.equal(d, "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c");
});
