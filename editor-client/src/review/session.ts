// The inline review of one proposed candidate in one document: a pure state machine (no `vscode`).
//
// The buffer shows, for every hunk, the original lines (to be removed) followed by the proposed
// lines (to be added). Each hunk is pending until it is accepted (its removed lines are deleted),
// rejected (its added lines are deleted) or dropped (the user edited its lines: they are left as
// the user made them). When no hunk is pending the review is finished; its buffer text is the result.
//
// The session mirrors the buffer's text. Every change of the document goes through `applyEvent`:
// an event that turns the text into the one a pending own operation (accept/reject) predicted is
// that operation; anything else is the user's edit, which shifts the hunks after it and drops the
// hunks whose lines it touches. Rejecting every hunk (with no user edit) gives back the original
// text byte for byte.

import { computeHunks, normalizeEol, splitLines } from "./hunks";

export type HunkStatus = "pending" | "accepted" | "rejected" | "dropped";

export interface ReviewHunk {
  index: number;
  status: HunkStatus;
  /** Original lines, exactly as in the document. */
  removed: string;
  /** Line break inserted between `removed` and `added` when `removed` ends without one (last line). */
  sep: string;
  /** Proposed lines, with the document's line breaks. */
  added: string;
  /** Offset of the hunk's block (removed + sep + added) in the current text; meaningful while pending. */
  start: number;
  /** 0-based line of the hunk in the original text (for messages). */
  originalLine: number;
}

/** One content change, in the UTF-16 offsets of the text before it (VS Code's rangeOffset/rangeLength). */
export interface Change {
  offset: number;
  length: number;
  text: string;
}

export interface Edit {
  offset: number;
  length: number;
  text: string;
}

export interface EventResult {
  /** True when the event was the pending own operation. */
  own: boolean;
  /** Hunks dropped by this event (user edits touched their lines). */
  dropped: ReviewHunk[];
}

export interface Outcome {
  finished: boolean;
  total: number;
  pending: number;
  accepted: number;
  rejected: number;
  dropped: number;
  text: string;
  /** The text is the original, byte for byte. */
  isOriginal: boolean;
  /** The text is the proposal (with the document's line breaks). */
  isProposed: boolean;
}

interface PendingOp {
  expectedText: string;
  /** Hunk index -> new status. */
  decisions: Map<number, HunkStatus>;
  /** The edits, in the offsets of the text before them, ascending and disjoint. */
  edits: Edit[];
}

export function blockLength(h: ReviewHunk): number {
  return h.removed.length + h.sep.length + h.added.length;
}

/** Apply disjoint edits given in the offsets of `text` (any order). */
export function applyEdits(text: string, edits: Edit[]): string {
  const sorted = [...edits].sort((x, y) => y.offset - x.offset);
  let out = text;
  for (const e of sorted) out = out.slice(0, e.offset) + e.text + out.slice(e.offset + e.length);
  return out;
}

export class ReviewSession {
  readonly original: string;
  readonly proposed: string;
  readonly eol: string;
  readonly hunks: ReviewHunk[];
  private _text: string;
  private pendingOp: PendingOp | null = null;
  private _userEdited = false;

  private constructor(original: string, proposed: string, eol: string, hunks: ReviewHunk[], text: string) {
    this.original = original;
    this.proposed = proposed;
    this.eol = eol;
    this.hunks = hunks;
    this._text = text;
  }

  /**
   * A session for `original` (the document's exact text) and `proposed` (normalized to `eol`).
   * Returns the session (in its initial state: the buffer still shows the original) and the edits,
   * in the original's offsets, that put the review into the buffer. Call `applyEvent` with the
   * document's change event once those edits are applied (it is recognized as own). No edits (only
   * deletions proposed): the buffer already shows the review.
   */
  static create(original: string, proposedRaw: string, eol: "\n" | "\r\n" = "\n"): { session: ReviewSession; edits: Edit[] } {
    const proposed = normalizeEol(proposedRaw, eol);
    const raw = computeHunks(original, proposed);
    const lines = splitLines(original);
    const lineOffsets: number[] = [0];
    for (const l of lines) lineOffsets.push(lineOffsets[lineOffsets.length - 1] + l.length);
    const hunks: ReviewHunk[] = [];
    const edits: Edit[] = [];
    raw.forEach((h, index) => {
      const removed = h.removed.join("");
      const added = h.added.join("");
      const sep = removed.length > 0 && added.length > 0 && !/[\r\n]$/.test(removed) ? eol : "";
      const origStart = lineOffsets[h.origStart];
      const insertAt = origStart + removed.length;
      if (sep.length + added.length > 0) edits.push({ offset: insertAt, length: 0, text: sep + added });
      // `start` in the original's offsets: the insertion event shifts it like any own edit
      hunks.push({ index, status: "pending", removed, sep, added, start: origStart, originalLine: h.origStart });
    });
    const session = new ReviewSession(original, proposed, eol, hunks, original);
    if (edits.length > 0) session.pendingOp = { expectedText: applyEdits(original, edits), decisions: new Map(), edits };
    return { session, edits };
  }

  /** The buffer text as the session knows it. */
  get text(): string {
    return this._text;
  }

  get userEdited(): boolean {
    return this._userEdited;
  }

  /** True while an own operation awaits its change event. */
  get busy(): boolean {
    return this.pendingOp !== null;
  }

  pending(): ReviewHunk[] {
    return this.hunks.filter((h) => h.status === "pending");
  }

  /** The pending hunk whose block contains `offset` (or the nearest one after it, else before it). */
  hunkAt(offset: number): ReviewHunk | undefined {
    const pending = this.pending();
    const inside = pending.find((h) => offset >= h.start && offset < h.start + blockLength(h));
    if (inside) return inside;
    return pending.find((h) => h.start >= offset) ?? pending[pending.length - 1];
  }

  /** [start, end) offsets of a pending hunk's removed part and added part in the current text. */
  ranges(h: ReviewHunk): { removed: [number, number]; added: [number, number] } {
    const r0 = h.start;
    const r1 = r0 + h.removed.length;
    const a0 = r1 + h.sep.length;
    return { removed: [r0, r1], added: [a0, a0 + h.added.length] };
  }

  /** The edits that accept hunk `index` (delete its original lines); the decision lands with its change event. */
  accept(index: number): Edit[] {
    return this.decide(new Map([[index, "accepted" as HunkStatus]]));
  }

  reject(index: number): Edit[] {
    return this.decide(new Map([[index, "rejected" as HunkStatus]]));
  }

  acceptAll(): Edit[] {
    return this.decide(new Map(this.pending().map((h) => [h.index, "accepted" as HunkStatus])));
  }

  rejectAll(): Edit[] {
    return this.decide(new Map(this.pending().map((h) => [h.index, "rejected" as HunkStatus])));
  }

  private decide(decisions: Map<number, HunkStatus>): Edit[] {
    if (this.pendingOp) throw new Error("another review operation is in progress");
    const edits: Edit[] = [];
    for (const [index, status] of decisions) {
      const h = this.hunks[index];
      if (!h || h.status !== "pending") throw new Error(`hunk ${index + 1} is not pending`);
      const del = status === "accepted"
        ? { offset: h.start, length: h.removed.length + h.sep.length, text: "" }
        : { offset: h.start + h.removed.length, length: h.sep.length + h.added.length, text: "" };
      if (del.length > 0) edits.push(del);
    }
    edits.sort((x, y) => x.offset - y.offset);
    if (edits.length === 0) {
      // nothing to change in the buffer (accepting a pure insertion, rejecting a pure deletion)
      for (const [index, status] of decisions) this.hunks[index].status = status;
      return [];
    }
    this.pendingOp = { expectedText: applyEdits(this._text, edits), decisions, edits };
    return edits;
  }

  /** The own operation's edits could not be applied (the editor refused): forget it. */
  cancelOwn(): void {
    this.pendingOp = null;
  }

  /**
   * One document change event (its changes applied in order, each in the offsets of the text
   * left by the previous one).
   */
  applyEvent(changes: Change[]): EventResult {
    if (changes.length === 0) return { own: false, dropped: [] };
    let after = this._text;
    for (const c of changes) after = after.slice(0, c.offset) + c.text + after.slice(c.offset + c.length);
    const op = this.pendingOp;
    if (op && after === op.expectedText) {
      this.commitOwn(op);
      this._text = after;
      this.pendingOp = null;
      return { own: true, dropped: [] };
    }
    // the user's edit (an own operation racing with it will not match any more: forget it)
    this.pendingOp = null;
    this._userEdited = true;
    const dropped: ReviewHunk[] = [];
    for (const c of changes) {
      for (const h of this.hunks) {
        if (h.status !== "pending") continue;
        const effect = userEffect(this._text, h, c);
        if (effect === "drop") {
          h.status = "dropped";
          dropped.push(h);
        } else if (effect === "shift") {
          h.start += c.text.length - c.length;
        }
      }
      this._text = this._text.slice(0, c.offset) + c.text + this._text.slice(c.offset + c.length);
    }
    return { own: false, dropped };
  }

  private commitOwn(op: PendingOp): void {
    for (const [index, status] of op.decisions) this.hunks[index].status = status;
    for (const h of this.hunks) {
      if (h.status !== "pending") continue;
      let delta = 0;
      for (const e of op.edits) {
        // an insertion exactly at a block's start is that block's own added text (a pure insertion)
        if (e.offset + e.length <= h.start && !(e.length === 0 && e.offset === h.start)) delta += e.text.length - e.length;
      }
      h.start += delta;
    }
  }

  outcome(): Outcome {
    const count = (s: HunkStatus) => this.hunks.filter((h) => h.status === s).length;
    const pending = count("pending");
    return {
      finished: pending === 0 && this.pendingOp === null,
      total: this.hunks.length,
      pending,
      accepted: count("accepted"),
      rejected: count("rejected"),
      dropped: count("dropped"),
      text: this._text,
      isOriginal: this._text === this.original,
      isProposed: this._text === this.proposed,
    };
  }
}

/**
 * What a user's change does to a pending hunk: nothing (after it), shift it (before it, leaving
 * its lines whole), or drop it (touches its lines, or joins them to a neighbour line).
 */
export function userEffect(text: string, h: ReviewHunk, c: Change): "none" | "shift" | "drop" {
  const S = h.start;
  const E = h.start + blockLength(h);
  const a = c.offset;
  const b = c.offset + c.length;
  if (b < S) return c.text.length === c.length ? "none" : "shift";
  if (b === S) {
    // ends right at the block: the block must still start a line afterwards
    const prev = c.text.length > 0 ? c.text[c.text.length - 1] : a > 0 ? text[a - 1] : "\n";
    if (prev !== "\n" && prev !== "\r") return "drop";
    return c.text.length === c.length ? "none" : "shift";
  }
  if (a > E) return "none";
  if (a === E) {
    const last = text[E - 1];
    return last === "\n" || last === "\r" ? "none" : "drop";
  }
  return "drop";
}

/** What to tell the server once the review is finished. */
export type FinalPlan =
  | { kind: "accept" } // at least one hunk accepted: forge.accept records the decision
  | { kind: "reject" }; // nothing accepted: forge.reject records it

export function finalPlan(outcome: Outcome): FinalPlan {
  return outcome.accepted > 0 ? { kind: "accept" } : { kind: "reject" };
}

/**
 * The edits that turn `from` into `to` as one replacement of the differing middle (common prefix
 * and suffix kept), in `from`'s offsets; [] when they are equal.
 */
export function minimalEdit(from: string, to: string): Edit[] {
  if (from === to) return [];
  let pre = 0;
  const max = Math.min(from.length, to.length);
  while (pre < max && from.charCodeAt(pre) === to.charCodeAt(pre)) pre++;
  let suf = 0;
  while (suf < max - pre && from.charCodeAt(from.length - 1 - suf) === to.charCodeAt(to.length - 1 - suf)) suf++;
  // never split a surrogate pair or a CRLF
  while (pre > 0 && (isLowSurrogate(from.charCodeAt(pre)) || (from[pre - 1] === "\r" && from[pre] === "\n"))) pre--;
  while (suf > 0 && (isLowSurrogate(from.charCodeAt(from.length - suf)) ||
    (from[from.length - suf - 1] === "\r" && from[from.length - suf] === "\n"))) suf--;
  return [{ offset: pre, length: from.length - pre - suf, text: to.slice(pre, to.length - suf) }];
}

function isLowSurrogate(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}
