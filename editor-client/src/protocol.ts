// The forge-lsp messages this client uses, with defensive parsers (the server is another process,
// possibly another version). Pure: no `vscode` import.
//
// Commands (workspace/executeCommand):
//   forge.optimize | forge.profile | forge.explain  [uri, name]                      -> {job} | {error}
//   forge.accept  [uri, className, runId, candidateId]  -> {applied, uri?, candidate?, message?}
//   forge.reject  [uri, className, runId, candidateId]  -> {rejected, message?}
//   forge.showDiff [uri, className, runId, candidateId, {show}?] -> {original, proposed, diff, speedup, summary, stale,
//                  proposedUri, diffUri} | {error}   (show: false = texts only, no window/showDocument)
//   forge.cancel  [jobId?]                                                            -> {cancelled: [ids]}
//   forge.optimizeModelWide [uri, function, resume?] -> {job} | {error}; forge.acceptModelWide |
//   forge.rejectModelWide | forge.undoModelWide [uri, function] -> {applied, files, classes, message?}
// Requests: forge/runs -> {runs: [Job]} (a finished optimize job carries its open `proposal`);
//           forge/run {runId} -> {run, candidates} | {error}
// The whole protocol, with every type: docs/lsp-extensions.md.
// Progress tokens: "forge/<jobId>"; diagnostics with code "faster-candidate" mark a proposal.

export const COMMANDS = {
  optimize: "forge.optimize",
  profile: "forge.profile",
  explain: "forge.explain",
  accept: "forge.accept",
  reject: "forge.reject",
  showDiff: "forge.showDiff",
  cancel: "forge.cancel",
  insertInputs: "forge.insertInputs",
  hotspots: "forge.hotspots",
  optimizeCaptured: "forge.optimizeCaptured",
  openReport: "forge.openReport",
  optimizeModelWide: "forge.optimizeModelWide",
  acceptModelWide: "forge.acceptModelWide",
  rejectModelWide: "forge.rejectModelWide",
  undoModelWide: "forge.undoModelWide",
} as const;

export const RUNS_REQUEST = "forge/runs";
export const PROPOSAL_CODE = "faster-candidate";
export const PROGRESS_PREFIX = "forge/";

export type JobStatus = "queued" | "running" | "done" | "failed" | "cancelled";
export type JobKind = "optimize" | "profile" | "explain" | "hotspots" | "model-wide" | string;

/** The verified faster candidate a finished optimize job offers (until accepted, rejected or stale). */
export interface JobProposal extends CandidateRef {
  /** The final re-timing against the reference (the answer). */
  speedup: number;
  /** What the search measured for the same candidate. */
  searchSpeedup: number | null;
  summary: string;
}

export type Decision = "accepted" | "rejected" | "stale";

export interface Job {
  id: string;
  kind: JobKind;
  uri: string;
  target: string;
  title: string;
  status: JobStatus;
  message: string;
  started: number;
  finished: number | null;
  runId: string | null;
  percentage: number;
  proposal: JobProposal | null;
  decision: Decision | null;
}

const STATUSES: JobStatus[] = ["queued", "running", "done", "failed", "cancelled"];

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function s(v: unknown, fallback = ""): string {
  return typeof v === "string" ? v : fallback;
}

function n(v: unknown): number | null {
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

export function parseJob(v: unknown): Job | null {
  if (!isObj(v) || typeof v.id !== "string") return null;
  const status = STATUSES.includes(v.status as JobStatus) ? (v.status as JobStatus) : "failed";
  const pct = n(v.percentage);
  return {
    id: v.id,
    kind: s(v.kind, "optimize"),
    uri: s(v.uri),
    target: s(v.target),
    title: s(v.title, v.id),
    status,
    message: s(v.message),
    started: n(v.started) ?? 0,
    finished: n(v.finished),
    runId: typeof v.runId === "string" ? v.runId : null,
    percentage: pct === null ? 0 : Math.max(0, Math.min(100, Math.round(pct))),
    proposal: parseJobProposal(v.proposal),
    decision: v.decision === "accepted" || v.decision === "rejected" || v.decision === "stale" ? v.decision : null,
  };
}

function parseJobProposal(v: unknown): JobProposal | null {
  if (!isObj(v)) return null;
  const ref = parseCandidateArgs([v.uri, v.className, v.runId, v.candidateId]);
  const speedup = n(v.speedup);
  if (!ref || speedup === null) return null;
  return { ...ref, speedup, searchSpeedup: n(v.searchSpeedup), summary: s(v.summary) };
}

/**
 * A best candidate's speedup, said the same way everywhere (and as the server says it): the final
 * re-timing is the answer; the search's own measurement of the same candidate is named beside it.
 */
export function speedupLabel(final: number, search: number | null = null): string {
  const f = final.toFixed(2);
  const extra = search !== null && search.toFixed(2) !== f ? `; search ${search.toFixed(2)}×` : "";
  return `${f}× (final re-timing${extra})`;
}

/** `forge/runs` reply -> jobs (malformed entries dropped). */
export function parseRuns(v: unknown): Job[] {
  const list = isObj(v) && Array.isArray(v.runs) ? v.runs : Array.isArray(v) ? v : [];
  return list.map(parseJob).filter((j): j is Job => j !== null);
}

export function isActive(job: Job): boolean {
  return job.status === "queued" || job.status === "running";
}

export interface CandidateRef {
  uri: string;
  className: string;
  runId: string;
  candidateId: string;
}

/** The 4 arguments of forge.accept/reject/showDiff (as a list, or the list wrapped once). */
export function parseCandidateArgs(args: unknown[]): CandidateRef | null {
  const values = args.length === 1 && Array.isArray(args[0]) ? (args[0] as unknown[]) : args;
  if (values.length < 4 || !values.slice(0, 4).every((x) => typeof x === "string")) return null;
  const [uri, className, runId, candidateId] = values as string[];
  return { uri, className, runId, candidateId };
}

export function candidateArgs(ref: CandidateRef): string[] {
  return [ref.uri, ref.className, ref.runId, ref.candidateId];
}

/** forge.showDiff arguments that ask for the texts only: this extension shows them in its own diff views. */
export function showDiffArgs(ref: CandidateRef): [string, string, string, string, { show: false }] {
  return [ref.uri, ref.className, ref.runId, ref.candidateId, { show: false }];
}

export interface TargetRef {
  uri: string;
  name: string;
}

export function parseTargetArgs(args: unknown[]): TargetRef | null {
  const values = args.length === 1 && Array.isArray(args[0]) ? (args[0] as unknown[]) : args;
  if (values.length < 2 || typeof values[0] !== "string" || typeof values[1] !== "string") return null;
  return { uri: values[0], name: values[1] };
}

export interface ShowDiff {
  original: string;
  proposed: string;
  diff: string;
  /** Final re-timing; `searchSpeedup`: the search's measurement of the same candidate. */
  speedup: number | null;
  searchSpeedup: number | null;
  summary: string;
  stale: boolean;
}

export function parseShowDiff(v: unknown): ShowDiff | { error: string } {
  if (!isObj(v)) return { error: "no reply from the server" };
  if (typeof v.error === "string") return { error: v.error };
  if (typeof v.original !== "string" || typeof v.proposed !== "string") {
    return { error: "the server's diff reply has no original/proposed text" };
  }
  return {
    original: v.original,
    proposed: v.proposed,
    diff: s(v.diff),
    speedup: n(v.speedup),
    searchSpeedup: n(v.searchSpeedup),
    summary: s(v.summary),
    stale: v.stale === true,
  };
}

export interface AcceptResult {
  applied: boolean;
  message: string;
}

export function parseAccept(v: unknown): AcceptResult {
  if (!isObj(v)) return { applied: false, message: "no reply from the server" };
  return { applied: v.applied === true, message: s(v.message) };
}

export function parseReject(v: unknown): { rejected: boolean; message: string } {
  if (!isObj(v)) return { rejected: false, message: "no reply from the server" };
  return { rejected: v.rejected === true, message: s(v.message) };
}

export function parseStart(v: unknown): { job: string } | { error: string } {
  if (isObj(v) && typeof v.job === "string") return { job: v.job };
  if (isObj(v) && typeof v.error === "string") return { error: v.error };
  return { error: "unexpected reply from the server" };
}

/** `forge/<jobId>` -> jobId; other tokens -> null. */
export function jobIdOfToken(token: unknown): string | null {
  return typeof token === "string" && token.startsWith(PROGRESS_PREFIX) ? token.slice(PROGRESS_PREFIX.length) : null;
}

export interface ProgressValue {
  kind: "begin" | "report" | "end";
  title?: string;
  message?: string;
  percentage?: number;
}

export function parseProgress(v: unknown): ProgressValue | null {
  if (!isObj(v) || (v.kind !== "begin" && v.kind !== "report" && v.kind !== "end")) return null;
  const out: ProgressValue = { kind: v.kind };
  if (typeof v.title === "string") out.title = v.title;
  if (typeof v.message === "string") out.message = v.message;
  const pct = n(v.percentage);
  if (pct !== null) out.percentage = pct;
  return out;
}
