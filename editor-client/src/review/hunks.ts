// Line hunks between two texts (Myers' O(ND) diff). Pure: no `vscode` import.
//
// Lines keep their terminators, so joining a hunk's lines gives back the exact bytes: a last line
// without a newline differs from the same line with one, and the diff says so.

export interface Hunk {
  /** [origStart, origEnd) lines of the original, replaced by [propStart, propEnd) of the proposal. */
  origStart: number;
  origEnd: number;
  propStart: number;
  propEnd: number;
  /** The original's lines (with their terminators). */
  removed: string[];
  /** The proposal's lines (with their terminators). */
  added: string[];
}

/** Split keeping line terminators ("\n", "\r\n", a lone "\r"); "" -> []. */
export function splitLines(text: string): string[] {
  const out: string[] = [];
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 10) {
      out.push(text.slice(start, i + 1));
      start = i + 1;
    } else if (c === 13) {
      const end = text.charCodeAt(i + 1) === 10 ? i + 2 : i + 1;
      out.push(text.slice(start, end));
      start = end;
      i = end - 1;
    }
  }
  if (start < text.length) out.push(text.slice(start));
  return out;
}

/** Every line terminator replaced by `eol`. */
export function normalizeEol(text: string, eol: string): string {
  return text.replace(/\r\n|\r|\n/g, eol);
}

type Op = "=" | "-" | "+";

/** The shortest edit script from a to b, as a list of ops (Myers 1986, linear-space not needed here). */
export function diffOps(a: string[], b: string[]): Op[] {
  const n = a.length;
  const m = b.length;
  // common prefix/suffix first: most proposals touch one region of a file
  let pre = 0;
  while (pre < n && pre < m && a[pre] === b[pre]) pre++;
  let suf = 0;
  while (suf < n - pre && suf < m - pre && a[n - 1 - suf] === b[m - 1 - suf]) suf++;
  const A = a.slice(pre, n - suf);
  const B = b.slice(pre, m - suf);
  const mid = myers(A, B);
  return [...Array<Op>(pre).fill("="), ...mid, ...Array<Op>(suf).fill("=")];
}

function myers(a: string[], b: string[]): Op[] {
  const n = a.length;
  const m = b.length;
  if (n === 0) return Array<Op>(m).fill("+");
  if (m === 0) return Array<Op>(n).fill("-");
  const max = n + m;
  const offset = max;
  let v = new Int32Array(2 * max + 2);
  const trace: Int32Array[] = [];
  outer: for (let d = 0; d <= max; d++) {
    trace.push(v.slice());
    for (let k = -d; k <= d; k += 2) {
      let x: number;
      if (k === -d || (k !== d && v[offset + k - 1] < v[offset + k + 1])) x = v[offset + k + 1];
      else x = v[offset + k - 1] + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[offset + k] = x;
      if (x >= n && y >= m) {
        trace.push(v.slice());
        break outer;
      }
    }
  }
  // backtrack
  const ops: Op[] = [];
  let x = n;
  let y = m;
  for (let d = trace.length - 2; d > 0; d--) {
    const vd = trace[d];
    const k = x - y;
    let prevK: number;
    if (k === -d || (k !== d && vd[offset + k - 1] < vd[offset + k + 1])) prevK = k + 1;
    else prevK = k - 1;
    const prevX = vd[offset + prevK];
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      ops.push("=");
      x--;
      y--;
    }
    if (x === prevX) {
      ops.push("+");
      y--;
    } else {
      ops.push("-");
      x--;
    }
  }
  while (x > 0 && y > 0) {
    ops.push("=");
    x--;
    y--;
  }
  while (x > 0) {
    ops.push("-");
    x--;
  }
  while (y > 0) {
    ops.push("+");
    y--;
  }
  return ops.reverse();
}

/** Contiguous changed regions between the original and the proposal, in order. */
export function computeHunks(original: string, proposed: string): Hunk[] {
  const a = splitLines(original);
  const b = splitLines(proposed);
  const ops = diffOps(a, b);
  const hunks: Hunk[] = [];
  let i = 0;
  let j = 0;
  let cur: Hunk | null = null;
  for (const op of ops) {
    if (op === "=") {
      if (cur) {
        hunks.push(cur);
        cur = null;
      }
      i++;
      j++;
      continue;
    }
    if (!cur) cur = { origStart: i, origEnd: i, propStart: j, propEnd: j, removed: [], added: [] };
    if (op === "-") {
      cur.removed.push(a[i]);
      i++;
      cur.origEnd = i;
    } else {
      cur.added.push(b[j]);
      j++;
      cur.propEnd = j;
    }
  }
  if (cur) hunks.push(cur);
  return hunks;
}

/** Apply hunks (a subset of computeHunks' output, in order) to the original: the text with just those taken. */
export function applyHunks(original: string, hunks: Hunk[]): string {
  const a = splitLines(original);
  const out: string[] = [];
  let i = 0;
  for (const h of hunks) {
    out.push(...a.slice(i, h.origStart), ...h.added);
    i = h.origEnd;
  }
  out.push(...a.slice(i));
  return out.join("");
}

/** A unified-diff rendering of hunks (for logs and the details view), with `context` lines around each. */
export function unifiedDiff(original: string, proposed: string, context = 3): string {
  const a = splitLines(original);
  const b = splitLines(proposed);
  const hunks = computeHunks(original, proposed);
  const lines: string[] = [];
  const strip = (l: string) => l.replace(/\r?\n$|\r$/, "");
  let idx = 0;
  while (idx < hunks.length) {
    // merge hunks whose context overlaps
    let last = idx;
    while (last + 1 < hunks.length && hunks[last + 1].origStart - hunks[last].origEnd <= 2 * context) last++;
    const first = hunks[idx];
    const end = hunks[last];
    const aStart = Math.max(0, first.origStart - context);
    const aEnd = Math.min(a.length, end.origEnd + context);
    const bStart = Math.max(0, first.propStart - context);
    const bEnd = Math.min(b.length, end.propEnd + context);
    lines.push(`@@ -${aStart + 1},${aEnd - aStart} +${bStart + 1},${bEnd - bStart} @@`);
    let i = aStart;
    for (let h = idx; h <= last; h++) {
      const hk = hunks[h];
      for (; i < hk.origStart; i++) lines.push(" " + strip(a[i]));
      for (const r of hk.removed) lines.push("-" + strip(r));
      for (const ad of hk.added) lines.push("+" + strip(ad));
      i = hk.origEnd;
    }
    for (; i < aEnd; i++) lines.push(" " + strip(a[i]));
    idx = last + 1;
  }
  return lines.join("\n");
}
