// The Python extension (ms-python.python), when it is installed: the active environment's
// interpreter, and an event when it changes. An optional dependency: everything works without it.

import * as vscode from "vscode";

interface EnvPath {
  id?: string;
  path?: string;
}

interface PythonApi {
  environments?: {
    getActiveEnvironmentPath?(resource?: vscode.Uri): EnvPath | undefined;
    resolveEnvironment?(env: EnvPath | string): Promise<{ executable?: { uri?: vscode.Uri }; environment?: { name?: string } } | undefined>;
    onDidChangeActiveEnvironmentPath?: vscode.Event<unknown>;
  };
  settings?: {
    getExecutionDetails?(resource?: vscode.Uri): { execCommand?: string[] } | undefined;
    onDidChangeExecutionDetails?: vscode.Event<unknown>;
  };
}

export const PYTHON_EXTENSION_ID = "ms-python.python";

async function api(): Promise<PythonApi | undefined> {
  const ext = vscode.extensions.getExtension<PythonApi>(PYTHON_EXTENSION_ID);
  if (!ext) return undefined;
  try {
    return ext.isActive ? ext.exports : await ext.activate();
  } catch {
    return undefined;
  }
}

/** The active environment's executable for a resource, or null (no extension, no environment). */
export async function activeInterpreter(resource?: vscode.Uri): Promise<{ executable: string; name?: string } | null> {
  const py = await api();
  if (!py) return null;
  try {
    const envs = py.environments;
    const active = envs?.getActiveEnvironmentPath?.(resource);
    if (active && envs?.resolveEnvironment) {
      const resolved = await envs.resolveEnvironment(active);
      const exe = resolved?.executable?.uri?.fsPath;
      if (exe) return { executable: exe, name: resolved?.environment?.name };
    }
    if (active?.path) return { executable: active.path };
    const cmd = py.settings?.getExecutionDetails?.(resource)?.execCommand;
    if (cmd && cmd.length === 1 && cmd[0]) return { executable: cmd[0] };
  } catch {
    // an API we do not understand: fall back to the default
  }
  return null;
}

/** Subscribe to interpreter changes in the Python extension (no-op without it). */
export async function onInterpreterChange(listener: () => void): Promise<vscode.Disposable> {
  const py = await api();
  const disposables: vscode.Disposable[] = [];
  const ev = py?.environments?.onDidChangeActiveEnvironmentPath ?? py?.settings?.onDidChangeExecutionDetails;
  if (ev) disposables.push(ev(() => listener()));
  return vscode.Disposable.from(...disposables);
}
