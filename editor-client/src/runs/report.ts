// The run report in VS Code: the server writes it (`forge.openReport` with `show: false`) and the extension
// shows the written page in a webview. Pure: no `vscode` import.
//
// The report is one self-contained page whose Content-Security-Policy allows only its own nonce'd script and
// style and data: images (no network, no frames, no forms). In the webview its nonce is replaced by a fresh
// one, so the CSP stays as strict as the run details' own.

export interface ReportResult {
  runId: string;
  url: string | null;
  path: string;
  inProgress: boolean;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/** The arguments of `forge.openReport` for the extension: the run, and no window/showDocument. */
export function reportArgs(runId: string): unknown[] {
  return [runId, { show: false }];
}

export function parseReportResult(value: unknown): ReportResult | { error: string } {
  if (!isObj(value)) return { error: "unexpected forge.openReport reply" };
  if (typeof value.error === "string") return { error: value.error };
  if (typeof value.runId !== "string" || typeof value.path !== "string") return { error: "unexpected forge.openReport reply" };
  return { runId: value.runId, url: typeof value.url === "string" ? value.url : null, path: value.path,
    inProgress: value.inProgress === true };
}

const CSP_META = /<meta http-equiv="Content-Security-Policy" content="([^"]*)">/;

/** The report's page for a webview: its nonce replaced by `nonce`; an error when it is not a forge report
 * with the expected strict policy (nothing else is ever put in the webview). */
export function reportWebviewHtml(html: string, nonce: string): string | { error: string } {
  const meta = CSP_META.exec(html);
  if (!meta) return { error: "the file is not a forge report (no Content-Security-Policy)" };
  const policy = meta[1].replace(/&#39;/g, "'");
  const old = /script-src 'nonce-([A-Za-z0-9_-]+)'/.exec(policy)?.[1];
  const strict = policy.includes("default-src 'none'") && policy.includes("connect-src 'none'") &&
    !policy.includes("unsafe-inline") && !policy.includes("unsafe-eval") && !/https?:/.test(policy);
  if (!old || !strict) return { error: "the report's Content-Security-Policy is not the strict one forge writes" };
  if (!/^[A-Za-z0-9_-]+$/.test(nonce)) return { error: "bad nonce" };
  return html.split(old).join(nonce);
}
