// Settings resolution, pure (no `vscode` import): what the server gets as `initializationOptions` /
// `workspace/configuration`, and the environment of the server process.
//
// Invariant: the API key never appears in the server settings (initializationOptions,
// workspace/configuration, didChangeConfiguration) nor in anything logged; it reaches the server
// only through its environment, under the variable named by `forge.apiKeyEnv`.

/** Reads one `forge.*` setting (VS Code's WorkspaceConfiguration.get, or a plain object in tests). */
export type SettingGetter = (key: string) => unknown;

/** The settings section the server understands (forge_lsp/server/settings.py), camelCase on the wire. */
export interface ServerSettings {
  model: string | null;
  baseUrl: string | null;
  judgeModel: string | null;
  apiKeyEnv: string;
  search: "mcts" | "linear";
  rounds: number;
  budgetUsd: number | null;
  wallS: number | null;
  concurrency: number;
  device: string;
  executor: string;
  workers: number;
  offline: boolean;
  profile: boolean;
  strict: boolean;
}

export const SERVER_DEFAULTS: ServerSettings = {
  model: null,
  baseUrl: null,
  judgeModel: null,
  apiKeyEnv: "OPENAI_API_KEY",
  search: "mcts",
  rounds: 10,
  budgetUsd: null,
  wallS: null,
  concurrency: 4,
  device: "auto",
  executor: "local",
  workers: 2,
  offline: true,
  profile: true,
  strict: false,
};

/** Settings that need a new server process when they change (the rest are pushed to the running one). */
export const PROCESS_KEYS = ["interpreter", "apiKeyEnv", "logLevel"] as const;

/** Keys of `forge.*` that are client-only: never sent to the server (it would warn "unknown setting"). */
export const CLIENT_ONLY_KEYS = ["interpreter", "diffMode", "logLevel", "trace"] as const;

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

function str(v: unknown): string | null {
  if (typeof v !== "string") return null;
  const s = v.trim();
  return s === "" ? null : s;
}

function int(v: unknown, lo: number, hi: number, fallback: number): number {
  return typeof v === "number" && Number.isInteger(v) && v >= lo && v <= hi ? v : fallback;
}

/** `local`, `ray` or `ray://HOST:PORT` (forge_lsp/server/settings.py checks the same), else null. */
function executorOf(v: unknown): string | null {
  const s = str(v);
  return s !== null && /^(local|ray|ray:\/\/\S+)$/.test(s) ? s : null;
}

function positiveOrNull(v: unknown, allowZero: boolean): number | null {
  if (typeof v !== "number" || !Number.isFinite(v)) return null;
  return v > 0 || (allowZero && v === 0) ? v : null;
}

/** The name of the variable that carries the API key (a valid env var name, else the default). */
export function apiKeyEnvName(get: SettingGetter): string {
  const name = str(get("apiKeyEnv"));
  return name && ENV_NAME.test(name) ? name : SERVER_DEFAULTS.apiKeyEnv;
}

/**
 * The `forge` section for the server, from the user's settings. Unset optional values are sent as
 * null (so clearing a setting clears it on the server, which merges over its previous settings);
 * invalid values fall back to the defaults. Takes no secret: it cannot put one in.
 */
export function serverSettings(get: SettingGetter): ServerSettings {
  const search = get("search");
  return {
    model: str(get("model")),
    baseUrl: str(get("baseUrl")),
    judgeModel: str(get("judgeModel")),
    apiKeyEnv: apiKeyEnvName(get),
    search: search === "linear" ? "linear" : "mcts",
    rounds: int(get("rounds"), 1, 1000, SERVER_DEFAULTS.rounds),
    budgetUsd: positiveOrNull(get("budgetUsd"), true),
    wallS: positiveOrNull(get("wallS"), false),
    concurrency: int(get("concurrency"), 1, 64, SERVER_DEFAULTS.concurrency),
    device: str(get("device")) ?? SERVER_DEFAULTS.device,
    executor: executorOf(get("executor")) ?? SERVER_DEFAULTS.executor,
    workers: int(get("workers"), 1, 16, SERVER_DEFAULTS.workers),
    offline: typeof get("offline") === "boolean" ? (get("offline") as boolean) : SERVER_DEFAULTS.offline,
    profile: typeof get("profile") === "boolean" ? (get("profile") as boolean) : SERVER_DEFAULTS.profile,
    strict: typeof get("strict") === "boolean" ? (get("strict") as boolean) : SERVER_DEFAULTS.strict,
  };
}

/** `initializationOptions` for the server: `{forge: {...}}`. */
export function initializationOptions(get: SettingGetter): { forge: ServerSettings } {
  return { forge: serverSettings(get) };
}

/** The answer to one `workspace/configuration` item, or undefined when it is not ours. */
export function configurationAnswer(section: string | undefined, get: SettingGetter): unknown {
  if (section === "forge") return serverSettings(get);
  if (section && section.startsWith("forge.")) {
    const key = section.slice("forge.".length) as keyof ServerSettings;
    const all = serverSettings(get);
    return key in all ? all[key] : null;
  }
  return undefined;
}

/** True when a change of these `forge.*` keys needs a server restart (new process). */
export function needsRestart(changed: (key: string) => boolean): boolean {
  return PROCESS_KEYS.some((k) => changed(k));
}

export interface ServerEnvInput {
  /** The extension host's environment (process.env). */
  base: Record<string, string | undefined>;
  /** The key from SecretStorage, if one was set. */
  apiKey?: string;
  get: SettingGetter;
  /** FORGE_LSP_LOG etc. for tests; applied last except for the key. */
  extra?: Record<string, string>;
}

/**
 * The server process's environment: the extension host's, plus the stored API key under the
 * configured variable name (a stored key wins over one inherited from the environment), plus the
 * log level. The only place a secret goes.
 */
export function serverEnv(input: ServerEnvInput): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(input.base)) if (typeof v === "string") env[k] = v;
  const level = str(input.get("logLevel"));
  if (level && ["DEBUG", "INFO", "WARNING", "ERROR"].includes(level)) env.FORGE_LSP_LOG_LEVEL = level;
  env.PYTHONUNBUFFERED = "1";
  Object.assign(env, input.extra ?? {});
  if (input.apiKey) env[apiKeyEnvName(input.get)] = input.apiKey;
  return env;
}

/** Names that look like secrets: their values are never printed. */
const SECRET_NAME = /(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)/i;

/** A printable description of a server environment: changed/added variables, secrets masked. */
export function describeEnv(env: Record<string, string>, base: Record<string, string | undefined>,
  secretNames: string[] = []): string {
  const lines: string[] = [];
  for (const k of Object.keys(env).sort()) {
    if (base[k] === env[k]) continue;
    const secret = secretNames.includes(k) || SECRET_NAME.test(k);
    lines.push(`${k}=${secret ? "<set, hidden>" : env[k]}`);
  }
  return lines.join(" ");
}

/** Replace every occurrence of the given secret values in a text (log lines) by a marker. */
export function redact(text: string, secrets: Array<string | undefined>): string {
  let out = text;
  for (const s of secrets) {
    if (s && s.length >= 4) out = out.split(s).join("<redacted>");
  }
  return out;
}
