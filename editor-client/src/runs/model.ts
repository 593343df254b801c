// The runs tree and the status-bar text, from `forge/runs` jobs. Pure: no `vscode` import.

import { isActive, Job, ProgressValue } from "../protocol";

export type GroupId = "active" | "done" | "failed";

export interface GroupNode {
  type: "group";
  id: GroupId;
  label: string;
  jobs: Job[];
}

export interface RunNode {
  type: "run";
  id: string;
  job: Job;
  label: string;
  description: string;
  tooltip: string;
  /** A codicon id. */
  icon: string;
  /** For `view/item/context` menus: forgeRun.active | forgeRun.done | forgeRun.failed | forgeRun.cancelled */
  contextValue: string;
}

export interface DetailNode {
  type: "detail";
  id: string;
  label: string;
  description: string;
}

export type Node = GroupNode | RunNode | DetailNode;

const GROUP_LABEL: Record<GroupId, string> = { active: "Running", done: "Done", failed: "Failed / cancelled" };

export function groupOf(job: Job): GroupId {
  if (isActive(job)) return "active";
  return job.status === "done" ? "done" : "failed";
}

/** Active runs first (oldest first: they finish first), then finished ones, newest first. */
export function sortJobs(jobs: Job[]): Job[] {
  return [...jobs].sort((a, b) => {
    const ga = isActive(a) ? 0 : 1;
    const gb = isActive(b) ? 0 : 1;
    if (ga !== gb) return ga - gb;
    if (ga === 0) return a.started - b.started;
    return (b.finished ?? b.started) - (a.finished ?? a.started);
  });
}

/** Root nodes: one group per non-empty status group, in the order running, done, failed. */
export function rootNodes(jobs: Job[]): GroupNode[] {
  const groups: GroupNode[] = [];
  for (const id of ["active", "done", "failed"] as GroupId[]) {
    const members = sortJobs(jobs.filter((j) => groupOf(j) === id));
    if (members.length) groups.push({ type: "group", id, label: `${GROUP_LABEL[id]} (${members.length})`, jobs: members });
  }
  return groups;
}

export function fileName(uri: string): string {
  const path = uri.replace(/[?#].*$/, "");
  const last = path.split("/").pop() ?? path;
  try {
    return decodeURIComponent(last);
  } catch {
    return last;
  }
}

export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "";
  if (seconds < 60) return `${Math.round(seconds)} s`;
  const m = Math.floor(seconds / 60);
  const s = Math.round(seconds - 60 * m);
  if (m < 60) return `${m} min ${s} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

const ICON: Record<string, string> = {
  queued: "clock",
  running: "sync~spin",
  done: "pass",
  failed: "error",
  cancelled: "circle-slash",
};

const DECISION_ICON: Record<string, string> = { accepted: "check", rejected: "close", stale: "history" };

export function runNode(job: Job, now: number): RunNode {
  const end = job.finished ?? now;
  const took = formatDuration(end - job.started);
  const pct = isActive(job) && job.percentage > 0 ? `${job.percentage}% · ` : "";
  const description = `${pct}${job.message || job.status}${took ? ` · ${took}` : ""}`;
  const tooltip = [
    `${job.title} (${job.id})`,
    `status: ${job.status}${job.message ? ` — ${job.message}` : ""}`,
    `file: ${fileName(job.uri)}`,
    job.runId ? `run: ${job.runId}` : "",
    job.proposal ? `open proposal: candidate ${job.proposal.candidateId}` : "",
    took ? `time: ${took}` : "",
  ].filter(Boolean).join("\n");
  return {
    type: "run",
    id: `run:${job.id}`,
    job,
    label: `${job.kind} ${job.target} · ${fileName(job.uri)}`,
    description,
    tooltip,
    icon: job.decision ? DECISION_ICON[job.decision] : ICON[job.status] ?? "question",
    contextValue: isActive(job) ? "forgeRun.active" : `forgeRun.${job.status}`,
  };
}

export function detailNodes(job: Job, now: number): DetailNode[] {
  const rows: Array<[string, string]> = [
    ["status", job.status + (isActive(job) && job.percentage ? ` (${job.percentage}%)` : "")],
    ["message", job.message],
    ["file", fileName(job.uri)],
    ["run", job.runId ?? ""],
    ["job", job.id],
    ["time", formatDuration((job.finished ?? now) - job.started)],
  ];
  return rows.filter(([, v]) => v).map(([k, v]) => ({ type: "detail", id: `detail:${job.id}:${k}`, label: k, description: v }));
}

/** Apply a `$/progress` value to the job it belongs to (between two polls). Returns a new list. */
export function applyProgress(jobs: Job[], jobId: string, value: ProgressValue): Job[] {
  return jobs.map((j) => {
    if (j.id !== jobId) return j;
    const next = { ...j };
    if (value.message !== undefined) next.message = value.message;
    if (value.percentage !== undefined) next.percentage = Math.max(0, Math.min(100, Math.round(value.percentage)));
    if (value.kind === "begin" && next.status === "queued") next.status = "running";
    return next;
  });
}

/** The status-bar item: the active runs' progress, or null (hidden) when none is active. */
export function statusBar(jobs: Job[]): { text: string; tooltip: string; jobId: string } | null {
  const active = sortJobs(jobs.filter(isActive));
  if (active.length === 0) return null;
  const first = active[0];
  const pct = first.percentage > 0 ? ` ${first.percentage}%` : "";
  const msg = first.message ? ` · ${first.message}` : "";
  const more = active.length > 1 ? ` (+${active.length - 1})` : "";
  const text = `$(sync~spin) forge: ${first.kind} ${first.target}${pct}${msg}${more}`;
  const tooltip = active.map((j) => `${j.title}: ${j.status}${j.percentage ? ` ${j.percentage}%` : ""}` +
    `${j.message ? ` — ${j.message}` : ""}`).join("\n") + "\nClick to show the runs.";
  return { text: truncate(text, 120), tooltip, jobId: first.id };
}

function truncate(text: string, max: number): string {
  return text.length <= max ? text : text.slice(0, max - 1) + "…";
}

/** How long until the next `forge/runs` poll: fast while a run is active, none when all are finished. */
export function pollDelayMs(jobs: Job[], failures = 0): number | null {
  if (!jobs.some(isActive)) return null;
  return Math.min(10_000, 1000 * 2 ** Math.min(failures, 4));
}

/** Jobs that finished between two polls (to announce them once). */
export function newlyFinished(before: Job[], after: Job[]): Job[] {
  const was = new Map(before.map((j) => [j.id, j]));
  return after.filter((j) => !isActive(j) && (was.get(j.id) === undefined ? false : isActive(was.get(j.id)!)));
}
