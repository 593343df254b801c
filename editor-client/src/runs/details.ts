// One run's details: its candidates (from forge's run store) and the HTML of the details webview.
// Pure: no `vscode` import.
//
// The run and its candidates come from the server's `forge/run` request (read from the run
// store). The HTML is built from that data alone: no network, no remote resources, a strict CSP
// and a nonce'd script.

import { Job, speedupLabel } from "../protocol";

export interface CandidateInfo {
  id: string;
  parent: string | null;
  origin: string;
  summary: string;
  status: string;
  speedup: number | null;
  correct: boolean | null;
  verdict: {
    status: string;
    reason: string;
    failedCheck: string | null;
    backend: string;
    device: string;
    referenceMs: number | null;
    candidateMs: number | null;
    speedup: number | null;
    ci95: [number, number] | null;
    timingMode: string;
    checks: Array<{ name: string; passed: boolean; detail: string }>;
  } | null;
  findings: Array<{ title: string; rule: string; suggestion: string }>;
  source: string;
}

/** The final re-timing of the run's best candidate (its answer), against the reference. */
export interface FinalTiming {
  candidate: string;
  speedup: number;
  ci95: [number, number] | null;
  referenceMs: number | null;
  candidateMs: number | null;
}

export interface RunInfo {
  id: string;
  status: string;
  message: string;
  task: string;
  modelClass: string;
  best: string | null;
  spentUsd: number | null;
  tokensIn: number | null;
  tokensOut: number | null;
  final: FinalTiming | null;
}

export interface RunDetails {
  run: RunInfo;
  candidates: CandidateInfo[];
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
const str = (v: unknown): string => (typeof v === "string" ? v : v === null || v === undefined ? "" : String(v));
const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);

/** The JSON of a `forge/run` reply -> details, or an error message. */
export function parseRunDetails(stdout: string): RunDetails | { error: string } {
  let data: unknown;
  try {
    data = JSON.parse(stdout.trim().split(/\r?\n/).pop() ?? "");
  } catch {
    return { error: "the forge/run reply is not JSON" };
  }
  if (!isObj(data)) return { error: "unexpected run store reply" };
  if (typeof data.error === "string") return { error: data.error };
  if (!isObj(data.run) || !Array.isArray(data.candidates)) return { error: "unexpected run store reply" };
  const r = data.run;
  const f = isObj(r.final) ? r.final : null;
  const run: RunInfo = {
    id: str(r.id), status: str(r.status), message: str(r.message), task: str(r.task), modelClass: str(r.modelClass),
    best: typeof r.best === "string" ? r.best : null, spentUsd: num(r.spentUsd), tokensIn: num(r.tokensIn),
    tokensOut: num(r.tokensOut),
    final: f && num(f.speedup) !== null ? {
      candidate: str(f.candidate), speedup: num(f.speedup) as number, ci95: pair(f.ci95),
      referenceMs: num(f.referenceMs), candidateMs: num(f.candidateMs),
    } : null,
  };
  const candidates: CandidateInfo[] = data.candidates.filter(isObj).map((c) => {
    const v = isObj(c.verdict) ? c.verdict : null;
    const ci = v ? pair(v.ci95) : null;
    return {
      id: str(c.id), parent: typeof c.parent === "string" ? c.parent : null, origin: str(c.origin), summary: str(c.summary),
      status: str(c.status), speedup: num(c.speedup), correct: typeof c.correct === "boolean" ? c.correct : null,
      verdict: v ? {
        status: str(v.status), reason: str(v.reason), failedCheck: typeof v.failedCheck === "string" ? v.failedCheck : null,
        backend: str(v.backend), device: str(v.device), referenceMs: num(v.referenceMs), candidateMs: num(v.candidateMs),
        speedup: num(v.speedup), ci95: ci, timingMode: str(v.timingMode),
        checks: Array.isArray(v.checks) ? v.checks.filter(isObj).map((k) => ({ name: str(k.name), passed: k.passed === true, detail: str(k.detail) })) : [],
      } : null,
      findings: Array.isArray(c.findings) ? c.findings.filter(isObj).map((f) => ({ title: str(f.title), rule: str(f.rule), suggestion: str(f.suggestion) })) : [],
      source: str(c.source),
    };
  });
  return { run, candidates };
}

function pair(v: unknown): [number, number] | null {
  return Array.isArray(v) && v.length === 2 && num(v[0]) !== null && num(v[1]) !== null ? [v[0] as number, v[1] as number] : null;
}

/** "1 candidate", "3 candidates". */
export function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

export function escapeHtml(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;");
}

/** A random nonce for the webview's CSP (base64url of 16 random bytes from the given source). */
export function makeNonce(random: (n: number) => Uint8Array): string {
  return Buffer.from(random(16)).toString("base64").replace(/[+/=]/g, (c) => ({ "+": "-", "/": "_", "=": "" }[c] ?? ""));
}

export function contentSecurityPolicy(nonce: string): string {
  return [
    "default-src 'none'",
    `style-src 'nonce-${nonce}'`,
    `script-src 'nonce-${nonce}'`,
    "img-src 'none'",
    "font-src 'none'",
    "connect-src 'none'",
    "form-action 'none'",
    "frame-src 'none'",
    "base-uri 'none'",
  ].join("; ");
}

export interface Proposal {
  candidateId: string;
  speedup: number | null;
  searchSpeedup: number | null;
  summary: string;
  diff: string;
  stale: boolean;
}

export interface DetailsInput {
  job: Job;
  /** The job's file as the user knows it (workspace-relative path). */
  file: string;
  details?: RunDetails;
  /** Why the candidates could not be read (shown instead of them). */
  detailsError?: string;
  /** The open proposal for this run, from forge.showDiff (if any). */
  proposal?: Proposal;
  /** Whether the webview may offer "Review" / "Accept" buttons for the proposal. */
  actions?: boolean;
}

const fmtMs = (v: number | null) => (v === null ? "–" : v < 1 ? `${(v * 1000).toFixed(1)} µs` : `${v.toFixed(3)} ms`);
const fmtX = (v: number | null) => (v === null ? "–" : `${v.toFixed(2)}×`);

function verdictCell(c: CandidateInfo): string {
  const v = c.verdict;
  if (!v) return `<span class="muted">${escapeHtml(c.status || "not evaluated")}</span>`;
  const cls = v.status === "correct" ? "ok" : "bad";
  const why = v.status !== "correct" && (v.failedCheck || v.reason)
    ? `<div class="muted">${escapeHtml(v.failedCheck ? `${v.failedCheck}: ${v.reason}` : v.reason).slice(0, 600)}</div>` : "";
  return `<span class="${cls}">${escapeHtml(v.status)}</span>${why}`;
}

/** The details page. Every dynamic string is escaped; only the nonce'd style and script run. */
export function renderDetailsHtml(input: DetailsInput, nonce: string): string {
  const { job, details, detailsError, proposal } = input;
  const parts: string[] = [];
  parts.push(`<h1>${escapeHtml(job.title)}</h1>`);
  parts.push(`<table class="kv">` + [
    ["status", `${job.status}${job.message ? ` — ${job.message}` : ""}`],
    ["file", input.file],
    ["target", job.target],
    ["job", job.id],
    ["run", job.runId ?? "–"],
  ].map(([k, v]) => `<tr><th>${escapeHtml(k)}</th><td>${escapeHtml(v)}</td></tr>`).join("") + `</table>`);
  if (job.runId) {
    parts.push(`<p><button data-command="report">Open the full report</button> ` +
      `<span class="muted">(the candidate tree, charts, roofline, every candidate's source, diffs and model calls)</span></p>`);
  }
  if (proposal) {
    const buttons = input.actions
      ? `<p><button data-command="review">Review inline</button> <button data-command="sideBySide">Side by side</button> ` +
        `<button data-command="accept">Accept</button> <button data-command="reject">Reject</button></p>` : "";
    const speed = proposal.speedup !== null ? speedupLabel(proposal.speedup, proposal.searchSpeedup) : "–";
    parts.push(`<h2>Proposed candidate ${escapeHtml(proposal.candidateId)}: ${escapeHtml(speed)}` +
      `${proposal.stale ? ' <span class="bad">(stale)</span>' : ""}</h2>` +
      `<p>${escapeHtml(proposal.summary)}</p>${buttons}` +
      `<details><summary>Diff</summary><pre class="diff">${renderDiff(proposal.diff)}</pre></details>`);
  }
  if (details) {
    const r = details.run;
    const spent = r.spentUsd !== null ? `$${r.spentUsd.toFixed(4)}` : "–";
    parts.push(`<h2>Run ${escapeHtml(r.id)}</h2><p>${escapeHtml(r.status)}${r.message ? ` — ${escapeHtml(r.message)}` : ""}` +
      ` · ${escapeHtml(plural(details.candidates.length, "candidate"))} · ${escapeHtml(spent)}` +
      `${r.tokensIn !== null ? ` · ${r.tokensIn} tokens in / ${r.tokensOut ?? 0} out` : ""}</p>`);
    if (r.final) {
      const best = details.candidates.find((c) => c.id === r.final?.candidate);
      const ci = r.final.ci95 ? ` [${r.final.ci95[0].toFixed(2)}, ${r.final.ci95[1].toFixed(2)}]` : "";
      parts.push(`<p class="final">Final re-timing of ${escapeHtml(r.final.candidate.split("/").pop() ?? "")}: ` +
        `<b>${escapeHtml(speedupLabel(r.final.speedup, best?.speedup ?? null))}</b>${escapeHtml(ci)}` +
        ` · reference ${escapeHtml(fmtMs(r.final.referenceMs))}, candidate ${escapeHtml(fmtMs(r.final.candidateMs))}` +
        ` <span class="muted">(the search's own measurements are in the table)</span></p>`);
    }
    parts.push(`<table class="cands"><thead><tr><th>id</th><th>origin</th><th>verdict</th><th>reference</th>` +
      `<th>candidate</th><th>speedup (search)</th><th>summary</th></tr></thead><tbody>` +
      details.candidates.map((c) => {
        const short = c.id.split("/").pop() ?? c.id;
        const best = r.best === c.id ? ' class="best"' : "";
        const v = c.verdict;
        const ci = v?.ci95 ? ` <span class="muted">[${v.ci95[0].toFixed(2)}, ${v.ci95[1].toFixed(2)}]</span>` : "";
        return `<tr${best}><td>${escapeHtml(short)}${r.best === c.id ? " ★" : ""}</td><td>${escapeHtml(c.origin)}</td>` +
          `<td>${verdictCell(c)}</td><td>${escapeHtml(fmtMs(v?.referenceMs ?? null))}</td>` +
          `<td>${escapeHtml(fmtMs(v?.candidateMs ?? null))}</td><td>${escapeHtml(fmtX(c.speedup ?? v?.speedup ?? null))}${ci}</td>` +
          `<td>${escapeHtml(c.summary)}</td></tr>`;
      }).join("") + `</tbody></table>`);
    for (const c of details.candidates) {
      const short = c.id.split("/").pop() ?? c.id;
      const findings = c.findings.length
        ? `<ul>${c.findings.map((f) => `<li><b>${escapeHtml(f.title)}</b>${f.rule ? ` <span class="muted">(${escapeHtml(f.rule)})</span>` : ""}` +
          `${f.suggestion ? ` — ${escapeHtml(f.suggestion)}` : ""}</li>`).join("")}</ul>` : "";
      const checks = c.verdict?.checks.length
        ? `<p>${c.verdict.checks.map((k) => `<span class="${k.passed ? "ok" : "bad"}" title="${escapeHtml(k.detail)}">` +
          `${k.passed ? "✓" : "✗"} ${escapeHtml(k.name)}</span>`).join(" ")}</p>` : "";
      parts.push(`<details><summary>${escapeHtml(short)} · ${escapeHtml(c.origin)} · ${escapeHtml(c.verdict?.status ?? c.status)}` +
        `${c.speedup !== null ? ` · ${escapeHtml(fmtX(c.speedup))} (search)` : ""}</summary>${checks}${findings}<pre class="src">${escapeHtml(c.source)}</pre></details>`);
    }
  } else if (detailsError) {
    parts.push(`<p class="muted">Candidates are not available: ${escapeHtml(detailsError)}</p>`);
  } else if (!job.runId) {
    parts.push(`<p class="muted">This job has no run in the run store (${escapeHtml(job.kind)} jobs keep none).</p>`);
  }
  const script = input.actions || job.runId
    ? `<script nonce="${nonce}">
const vscode = acquireVsCodeApi();
for (const b of document.querySelectorAll("button[data-command]")) {
  b.addEventListener("click", () => vscode.postMessage({ command: b.dataset.command }));
}
</script>` : "";
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${contentSecurityPolicy(nonce)}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>${escapeHtml(job.title)}</title>
<style nonce="${nonce}">
body { font-family: var(--vscode-font-family); color: var(--vscode-foreground); padding: 0 1em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { text-align: left; padding: 2px 8px; vertical-align: top; }
table.cands tr { border-bottom: 1px solid var(--vscode-panel-border); }
tr.best { font-weight: bold; }
.ok { color: var(--vscode-testing-iconPassed); }
.bad { color: var(--vscode-errorForeground); }
.muted { color: var(--vscode-descriptionForeground); }
pre { font-family: var(--vscode-editor-font-family); background: var(--vscode-textCodeBlock-background); padding: .5em; overflow-x: auto; }
.add { color: var(--vscode-gitDecoration-addedResourceForeground); }
.del { color: var(--vscode-gitDecoration-deletedResourceForeground); }
</style></head>
<body>
${parts.join("\n")}
${script}
</body></html>`;
}

function renderDiff(diff: string): string {
  return diff.split("\n").map((line) => {
    const e = escapeHtml(line);
    if (line.startsWith("+") && !line.startsWith("+++")) return `<span class="add">${e}</span>`;
    if (line.startsWith("-") && !line.startsWith("---")) return `<span class="del">${e}</span>`;
    return e;
  }).join("\n");
}
