import { test } from "node:test";
import * as assert from "node:assert/strict";
import { applyHunks, computeHunks, normalizeEol } from "../src/review/hunks";
import { applyEdits, blockLength, Change, Edit, finalPlan, minimalEdit, ReviewSession, userEffect } from "../src/review/session";

/** A document as VS Code holds it: edits applied at once, reported as changes in descending order. */
class Doc {
  constructor(public text: string) {}
  apply(edits: Edit[]): Change[] {
    const changes = [...edits].sort((a, b) => b.offset - a.offset).map((e) => ({ offset: e.offset, length: e.length, text: e.text }));
    for (const c of changes) this.text = this.text.slice(0, c.offset) + c.text + this.text.slice(c.offset + c.length);
    return changes;
  }
  type(offset: number, length: number, text: string): Change[] {
    return this.apply([{ offset, length, text }]);
  }
}

function start(original: string, proposed: string, eol: "\n" | "\r\n" = "\n") {
  const doc = new Doc(original);
  const { session, edits } = ReviewSession.create(original, proposed, eol);
  if (edits.length > 0) {
    assert.equal(session.busy, true);
    const r = session.applyEvent(doc.apply(edits));
    assert.equal(r.own, true);
  }
  assert.equal(session.busy, false);
  assert.equal(session.text, doc.text);
  return { doc, session };
}

function act(session: ReviewSession, doc: Doc, edits: Edit[]) {
  if (edits.length === 0) return;
  const r = session.applyEvent(doc.apply(edits));
  assert.equal(r.own, true, "own operation recognized");
  assert.equal(session.text, doc.text);
}

/** Every pending hunk's block is intact where the session says, and starts a line. */
function checkInvariants(session: ReviewSession, doc: Doc) {
  assert.equal(session.text, doc.text);
  for (const h of session.pending()) {
    assert.equal(doc.text.slice(h.start, h.start + blockLength(h)), h.removed + h.sep + h.added, `hunk ${h.index} intact`);
    assert.ok(h.start === 0 || /[\r\n]/.test(doc.text[h.start - 1]), `hunk ${h.index} starts a line`);
  }
}

const ORIGINAL = [
  "import torch",
  "import torch.nn as nn",
  "",
  "",
  "class Model(nn.Module):",
  "    def forward(self, x):",
  "        return torch.stack([torch.softmax(r, dim=0) for r in x])",
  "",
  "",
  "def get_inputs():",
  "    return [torch.randn(4, 8)]",
  "",
].join("\n");

const PROPOSED = [
  "import torch",
  "import torch.nn as nn",
  "import triton",
  "",
  "",
  "class _ModelReference(nn.Module):",
  "    def forward(self, x):",
  "        return torch.stack([torch.softmax(r, dim=0) for r in x])",
  "",
  "",
  "class Model(_ModelReference):",
  "    def forward(self, x):",
  "        return torch.softmax(x, dim=1)",
  "",
  "",
  "def get_inputs():",
  "    return [torch.randn(4, 8)]",
  "",
].join("\n");

test("the review shows removed then added lines; nothing is decided yet", () => {
  const { doc, session } = start(ORIGINAL, PROPOSED);
  const o = session.outcome();
  assert.equal(o.finished, false);
  assert.equal(o.pending, session.hunks.length);
  assert.ok(o.total >= 2);
  for (const h of session.hunks) {
    const r = session.ranges(h);
    assert.equal(doc.text.slice(...r.removed), h.removed);
    assert.equal(doc.text.slice(...r.added), h.added);
  }
  assert.ok(doc.text.includes("class Model(nn.Module):\nclass _ModelReference(nn.Module):\n"));
  checkInvariants(session, doc);
});

test("reject all restores the buffer byte for byte", () => {
  const { doc, session } = start(ORIGINAL, PROPOSED);
  act(session, doc, session.rejectAll());
  const o = session.outcome();
  assert.equal(o.finished, true);
  assert.equal(o.rejected, o.total);
  assert.equal(doc.text, ORIGINAL);
  assert.equal(o.isOriginal, true);
  assert.deepEqual(finalPlan(o), { kind: "reject" });
});

test("accept all gives the proposal", () => {
  const { doc, session } = start(ORIGINAL, PROPOSED);
  act(session, doc, session.acceptAll());
  const o = session.outcome();
  assert.equal(o.finished, true);
  assert.equal(doc.text, PROPOSED);
  assert.equal(o.isProposed, true);
  assert.deepEqual(finalPlan(o), { kind: "accept" });
});

test("hunk by hunk: any accept/reject mix equals the original with just the accepted hunks", () => {
  const raw = computeHunks(ORIGINAL, PROPOSED);
  const n = raw.length;
  for (let mask = 0; mask < 1 << n; mask++) {
    for (const order of [1, -1]) {
      const { doc, session } = start(ORIGINAL, PROPOSED);
      const idx = [...Array(n).keys()];
      if (order < 0) idx.reverse();
      for (const i of idx) {
        act(session, doc, mask & (1 << i) ? session.accept(i) : session.reject(i));
        checkInvariants(session, doc);
      }
      const expected = applyHunks(ORIGINAL, raw.filter((_, i) => mask & (1 << i)));
      assert.equal(doc.text, expected, `mask ${mask} order ${order}`);
      assert.equal(session.outcome().finished, true);
    }
  }
});

test("a decided hunk cannot be decided again; one operation at a time", () => {
  const { doc, session } = start(ORIGINAL, PROPOSED);
  assert.equal(session.hunks[0].removed, "", "hunk 0 is a pure insertion");
  const edits = session.reject(0);
  assert.throws(() => session.reject(1), /in progress/);
  act(session, doc, edits);
  assert.throws(() => session.accept(0), /not pending/);
  assert.throws(() => session.accept(99), /not pending/);
});

test("an editor that refuses the edit: cancelOwn leaves the hunk pending", () => {
  const { doc, session } = start(ORIGINAL, PROPOSED);
  assert.ok(session.reject(0).length > 0);
  session.cancelOwn();
  assert.equal(session.hunks[0].status, "pending");
  assert.equal(session.busy, false);
  act(session, doc, session.reject(0));
  assert.equal(session.hunks[0].status, "rejected");
});

test("pure insertion: accept needs no buffer edit; reject deletes it. Pure deletion: the reverse", () => {
  {
    const { doc, session } = start("a\nb\n", "a\nx\nb\n");
    assert.deepEqual(session.accept(0), []);
    assert.equal(session.hunks[0].status, "accepted");
    assert.equal(doc.text, "a\nx\nb\n");
  }
  {
    const { doc, session } = start("a\nb\n", "a\nx\nb\n");
    act(session, doc, session.reject(0));
    assert.equal(doc.text, "a\nb\n");
  }
  {
    const { doc, session } = start("a\nx\nb\n", "a\nb\n");
    assert.deepEqual(session.reject(0), []);
    assert.equal(doc.text, "a\nx\nb\n");
  }
  {
    const { doc, session } = start("a\nx\nb\n", "a\nb\n");
    act(session, doc, session.accept(0));
    assert.equal(doc.text, "a\nb\n");
  }
});

test("last line without a newline: a separator keeps lines apart; reject/accept are exact", () => {
  for (const [o, p] of [["a\nb", "a\nc"], ["a\nb", "a\nc\n"], ["a\nb\n", "a\nc"], ["b", "c\nd"]]) {
    {
      const { doc, session } = start(o, p);
      assert.ok(!/b[^\r\n]/.test(doc.text.replace(/b$/, "")), `lines stay apart in ${JSON.stringify(doc.text)}`);
      act(session, doc, session.rejectAll());
      assert.equal(doc.text, o);
    }
    {
      const { doc, session } = start(o, p);
      act(session, doc, session.acceptAll());
      assert.equal(doc.text, p);
    }
  }
});

test("CRLF documents: the proposal takes the document's line breaks; reject is byte for byte", () => {
  const o = ORIGINAL.replace(/\n/g, "\r\n");
  {
    const { doc, session } = start(o, PROPOSED, "\r\n");
    assert.ok(!/[^\r]\n/.test(doc.text), "no bare LF in a CRLF document");
    act(session, doc, session.rejectAll());
    assert.equal(doc.text, o);
  }
  {
    const { doc, session } = start(o, PROPOSED, "\r\n");
    act(session, doc, session.acceptAll());
    assert.equal(doc.text, normalizeEol(PROPOSED, "\r\n"));
    assert.equal(session.outcome().isProposed, true);
  }
});

test("user edits before a hunk shift it; the review still ends exactly", () => {
  const { doc, session } = start(ORIGINAL, PROPOSED);
  const edit = session.text.indexOf("import torch.nn");
  session.applyEvent(doc.type(edit, 0, "# my comment\n"));
  assert.equal(session.pending().length, session.hunks.length, "nothing dropped");
  checkInvariants(session, doc);
  act(session, doc, session.rejectAll());
  assert.equal(doc.text, ORIGINAL.replace("import torch.nn", "# my comment\nimport torch.nn"));
  assert.equal(session.userEdited, true);
});

test("typing at the end of the line before a hunk does not drop it; joining that line to the hunk does", () => {
  {
    const { doc, session } = start("a\nb\nc\n", "a\nB\nc\n");
    session.applyEvent(doc.type(1, 0, "aa")); // "a" -> "aaa"
    assert.equal(session.pending().length, 1);
    checkInvariants(session, doc);
    act(session, doc, session.acceptAll());
    assert.equal(doc.text, "aaa\nB\nc\n");
  }
  {
    const { doc, session } = start("a\nb\nc\n", "a\nB\nc\n");
    const r = session.applyEvent(doc.type(1, 1, "")); // delete the newline after "a"
    assert.equal(r.dropped.length, 1);
    assert.equal(session.outcome().finished, true);
    assert.equal(session.outcome().dropped, 1);
  }
});

test("a new line inserted right before a hunk shifts it; text typed at its first line drops it", () => {
  {
    const { doc, session } = start("a\nb\nc\n", "a\nB\nc\n");
    const s = session.hunks[0].start;
    session.applyEvent(doc.type(s, 0, "new\n"));
    assert.equal(session.pending().length, 1);
    checkInvariants(session, doc);
  }
  {
    const { doc, session } = start("a\nb\nc\n", "a\nB\nc\n");
    const s = session.hunks[0].start;
    const r = session.applyEvent(doc.type(s, 0, "x"));
    assert.equal(r.dropped.length, 1);
  }
});

test("user edits inside a hunk drop that hunk only, and never touch the user's text", () => {
  const { doc, session } = start(ORIGINAL, PROPOSED);
  const victim = session.hunks[1];
  const r0 = session.ranges(victim).added[0];
  const r = session.applyEvent(doc.type(r0 + 4, 0, "USER"));
  assert.deepEqual(r.dropped.map((h) => h.index), [1]);
  assert.equal(session.hunks[1].status, "dropped");
  const userText = doc.text;
  assert.ok(userText.includes("USER"));
  checkInvariants(session, doc);
  act(session, doc, session.rejectAll());
  assert.ok(doc.text.includes("USER"), "the user's edit survives reject all");
  const o = session.outcome();
  assert.equal(o.finished, true);
  assert.equal(o.dropped, 1);
  assert.equal(o.rejected, o.total - 1);
});

test("an edit after the last hunk changes nothing; an edit spanning two hunks drops both", () => {
  const { doc, session } = start("a\nb\nc\nd\ne\n", "a\nB\nc\nD\ne\n");
  session.applyEvent(doc.type(doc.text.length, 0, "tail\n"));
  assert.equal(session.pending().length, 2);
  const from = session.hunks[0].start + 1;
  const to = session.hunks[1].start + 1;
  const r = session.applyEvent(doc.type(from, to - from, ""));
  assert.equal(r.dropped.length, 2);
});

test("random user edits keep every pending hunk intact and line-aligned", () => {
  let seed = 42;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  for (let trial = 0; trial < 200; trial++) {
    const { doc, session } = start(ORIGINAL, PROPOSED);
    for (let step = 0; step < 6; step++) {
      const roll = rnd();
      const pending = session.pending();
      if (roll < 0.3 && pending.length) {
        const h = pending[Math.floor(rnd() * pending.length)];
        act(session, doc, rnd() < 0.5 ? session.accept(h.index) : session.reject(h.index));
      } else {
        const at = Math.floor(rnd() * (doc.text.length + 1));
        const len = Math.min(doc.text.length - at, Math.floor(rnd() * 4));
        const text = ["", "x", "\n", "y\n", "\nz"][Math.floor(rnd() * 5)];
        if (len === 0 && text === "") continue;
        session.applyEvent(doc.type(at, len, text));
      }
      checkInvariants(session, doc);
    }
    const left = session.pending();
    if (left.length) act(session, doc, session.rejectAll());
    assert.equal(session.outcome().finished, true);
    assert.equal(session.text, doc.text);
  }
});

test("userEffect boundaries", () => {
  const text = "a\nOLD\nNEW\nz\n";
  const h = { index: 0, status: "pending" as const, removed: "OLD\n", sep: "", added: "NEW\n", start: 2, originalLine: 1 };
  assert.equal(userEffect(text, h, { offset: 0, length: 0, text: "q" }), "shift");
  assert.equal(userEffect(text, h, { offset: 0, length: 1, text: "b" }), "none");
  assert.equal(userEffect(text, h, { offset: 2, length: 0, text: "new\n" }), "shift");
  assert.equal(userEffect(text, h, { offset: 2, length: 0, text: "x" }), "drop");
  assert.equal(userEffect(text, h, { offset: 1, length: 1, text: "" }), "drop");
  assert.equal(userEffect(text, h, { offset: 0, length: 2, text: "" }), "shift");
  assert.equal(userEffect(text, h, { offset: 5, length: 0, text: "x" }), "drop");
  assert.equal(userEffect(text, h, { offset: 10, length: 0, text: "x" }), "none");
  assert.equal(userEffect(text, h, { offset: 10, length: 1, text: "" }), "none");
  assert.equal(userEffect(text, h, { offset: 9, length: 1, text: "" }), "drop");
});

test("minimalEdit turns one text into another with one replacement, never splitting CRLF", () => {
  for (const [a, b] of [["abc", "abc"], ["abc", "abXc"], ["a\r\nb", "a\nb"], ["", "x"], ["x", ""], ["a\r\n", "a\r\nb\r\n"]]) {
    const edits = minimalEdit(a, b);
    assert.equal(applyEdits(a, edits), b);
    if (a === b) assert.deepEqual(edits, []);
    for (const e of edits) {
      assert.ok(!(a[e.offset - 1] === "\r" && a[e.offset] === "\n"));
    }
  }
});
