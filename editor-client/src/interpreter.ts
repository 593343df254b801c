// Which Python runs the server, and how to install forge-lsp into it. Pure (no `vscode` import).

export type InterpreterSource = "setting" | "python-extension" | "default";

export interface InterpreterChoice {
  /** argv[0] and any leading arguments (e.g. `conda run -n env python` style environments). */
  command: string;
  args: string[];
  source: InterpreterSource;
  /** Human-readable: "forge.interpreter", "Python extension (name)", "python3 on PATH". */
  label: string;
}

export interface InterpreterInputs {
  /** The `forge.interpreter` setting. */
  setting?: string | null;
  /** The Python extension's active environment for the workspace: its executable (if any). */
  pythonExtension?: { executable?: string | null; name?: string | null } | null;
  /** Expands `${workspaceFolder}` and `~`. */
  workspaceFolder?: string | null;
  home?: string | null;
  /** Platform default: `python3` (POSIX) or `python` (Windows). */
  platform?: string;
}

/** Expand `${workspaceFolder}`, `${userHome}`, `~/` and `${env:NAME}` in a path setting. */
export function expandPath(value: string, ws: string | null | undefined, home: string | null | undefined,
  env: Record<string, string | undefined> = {}): string {
  let out = value.trim();
  if (ws) out = out.split("${workspaceFolder}").join(ws);
  if (home) {
    out = out.split("${userHome}").join(home);
    if (out === "~" || out.startsWith("~/")) out = home + out.slice(1);
  }
  out = out.replace(/\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}/g, (_m, name: string) => env[name] ?? "");
  return out;
}

/**
 * The interpreter: the `forge.interpreter` setting, else the Python extension's active
 * environment, else `python3` (`python` on Windows).
 */
export function chooseInterpreter(inputs: InterpreterInputs): InterpreterChoice {
  const setting = (inputs.setting ?? "").trim();
  if (setting) {
    const command = expandPath(setting, inputs.workspaceFolder, inputs.home);
    return { command, args: [], source: "setting", label: `forge.interpreter (${command})` };
  }
  const ext = inputs.pythonExtension;
  const exe = (ext?.executable ?? "").trim();
  if (exe) {
    const name = ext?.name ? `${ext.name}: ` : "";
    return { command: exe, args: [], source: "python-extension", label: `Python extension (${name}${exe})` };
  }
  const fallback = inputs.platform === "win32" ? "python" : "python3";
  return { command: fallback, args: [], source: "default", label: `${fallback} on PATH` };
}

/** argv of the server: `<python> -m forge_lsp.server`. */
export function serverArgv(choice: InterpreterChoice): { command: string; args: string[] } {
  return { command: choice.command, args: [...choice.args, "-m", "forge_lsp.server"] };
}

/** argv that checks forge_lsp is importable and prints its version and location as JSON. */
export const PROBE_CODE =
  "import json, sys\n" +
  "try:\n" +
  "    import forge_lsp\n" +
  "except Exception as e:\n" +
  "    print(json.dumps({'ok': False, 'python': sys.version.split()[0], 'error': f'{type(e).__name__}: {e}'}))\n" +
  "else:\n" +
  "    print(json.dumps({'ok': True, 'python': sys.version.split()[0], 'version': getattr(forge_lsp, '__version__', '?'), 'path': list(getattr(forge_lsp, '__path__', []))[:1]}))\n";

export function probeArgv(choice: InterpreterChoice): { command: string; args: string[] } {
  return { command: choice.command, args: [...choice.args, "-c", PROBE_CODE] };
}

export type ProbeResult =
  | { ok: true; python: string; version: string; path?: string }
  | { ok: false; reason: "missing-module" | "no-interpreter" | "failed"; detail: string; python?: string };

/** Interpret the probe's outcome: exit code, stdout, stderr, and the spawn error (ENOENT...) if any. */
export function parseProbe(code: number | null, stdout: string, stderr: string,
  spawnError?: { code?: string; message: string }): ProbeResult {
  if (spawnError) {
    const missing = spawnError.code === "ENOENT" || spawnError.code === "EACCES";
    return { ok: false, reason: missing ? "no-interpreter" : "failed", detail: spawnError.message };
  }
  const line = stdout.trim().split(/\r?\n/).pop() ?? "";
  try {
    const data = JSON.parse(line) as Record<string, unknown>;
    if (data.ok === true) {
      const path = Array.isArray(data.path) && typeof data.path[0] === "string" ? data.path[0] : undefined;
      return { ok: true, python: String(data.python ?? "?"), version: String(data.version ?? "?"), path };
    }
    if (data.ok === false) {
      return { ok: false, reason: "missing-module", detail: String(data.error ?? "cannot import forge_lsp"),
        python: typeof data.python === "string" ? data.python : undefined };
    }
  } catch {
    // not our JSON: fall through
  }
  const tail = (stderr || stdout).trim().split(/\r?\n/).slice(-3).join(" | ");
  return { ok: false, reason: "failed", detail: `exit ${code}: ${tail || "no output"}` };
}

/** Quote one argument for a POSIX shell or PowerShell (the integrated terminal). */
export function shellQuote(arg: string, platform: string = "linux"): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(arg)) return arg;
  if (platform === "win32") return `'${arg.replace(/'/g, "''")}'`;
  return `'${arg.replace(/'/g, `'\\''`)}'`;
}

/**
 * The terminal command that installs forge-lsp into the chosen interpreter: from PyPI, or editable
 * from a local checkout (a folder with forge-lsp's pyproject.toml).
 */
export function installCommand(choice: InterpreterChoice, from: { kind: "pypi" } | { kind: "path"; path: string },
  platform: string = "linux"): string {
  const q = (s: string) => shellQuote(s, platform);
  const head = [choice.command, ...choice.args].map(q).join(" ");
  const call = platform === "win32" && /[\s']/.test(choice.command) ? `& ${head}` : head;
  const target = from.kind === "pypi" ? "forge-lsp" : q(from.path);
  const editable = from.kind === "path" ? "-e " : "";
  return `${call} -m pip install ${editable}${target}`;
}

/** True when a pyproject.toml text declares the forge-lsp project (a local checkout to install from). */
export function isForgeCheckout(pyprojectText: string): boolean {
  return /^\s*name\s*=\s*["']forge[-_]lsp["']\s*$/m.test(pyprojectText);
}
