import { test } from "node:test";
import * as assert from "node:assert/strict";
import { chooseInterpreter, expandPath, installCommand, isForgeCheckout, parseProbe, probeArgv, serverArgv, shellQuote } from "../src/interpreter";

test("the forge.interpreter setting wins, with ${workspaceFolder} and ~ expanded", () => {
  const c = chooseInterpreter({ setting: "${workspaceFolder}/.venv/bin/python", pythonExtension: { executable: "/opt/conda/bin/python" },
    workspaceFolder: "/ws", home: "/home/u" });
  assert.equal(c.command, "/ws/.venv/bin/python");
  assert.equal(c.source, "setting");
  assert.equal(chooseInterpreter({ setting: "~/py/bin/python", home: "/home/u" }).command, "/home/u/py/bin/python");
});

test("then the Python extension's active environment", () => {
  const c = chooseInterpreter({ setting: "  ", pythonExtension: { executable: "/opt/conda/envs/t/bin/python", name: "t" } });
  assert.equal(c.command, "/opt/conda/envs/t/bin/python");
  assert.equal(c.source, "python-extension");
  assert.match(c.label, /t: \/opt\/conda/);
});

test("then python3 (python on Windows); no extension or no environment is fine", () => {
  for (const ext of [undefined, null, { executable: "" }, { executable: null }]) {
    const c = chooseInterpreter({ pythonExtension: ext });
    assert.equal(c.command, "python3");
    assert.equal(c.source, "default");
  }
  assert.equal(chooseInterpreter({ platform: "win32" }).command, "python");
});

test("expandPath handles ${env:NAME} and ${userHome}", () => {
  assert.equal(expandPath("${env:VENV}/bin/python", null, null, { VENV: "/v" }), "/v/bin/python");
  assert.equal(expandPath("${userHome}/x", null, "/h"), "/h/x");
});

test("server and probe argv", () => {
  const c = chooseInterpreter({ setting: "/py" });
  assert.deepEqual(serverArgv(c), { command: "/py", args: ["-m", "forge_lsp.server"] });
  const p = probeArgv(c);
  assert.equal(p.command, "/py");
  assert.equal(p.args[0], "-c");
  assert.match(p.args[1], /import forge_lsp/);
});

test("parseProbe: importable, missing module, no interpreter, garbage", () => {
  assert.deepEqual(parseProbe(0, '{"ok": true, "python": "3.11.7", "version": "0.1.0", "path": ["/x/forge_lsp"]}\n', ""),
    { ok: true, python: "3.11.7", version: "0.1.0", path: "/x/forge_lsp" });
  const missing = parseProbe(0, '{"ok": false, "python": "3.12.1", "error": "ModuleNotFoundError: No module named \'forge_lsp\'"}', "");
  assert.equal(missing.ok, false);
  assert.equal(!missing.ok && missing.reason, "missing-module");
  const none = parseProbe(null, "", "", { code: "ENOENT", message: "spawn python3 ENOENT" });
  assert.equal(!none.ok && none.reason, "no-interpreter");
  const bad = parseProbe(1, "", "Traceback...\nSyntaxError: x");
  assert.equal(!bad.ok && bad.reason, "failed");
  assert.match(!bad.ok ? bad.detail : "", /SyntaxError/);
});

test("the probe really runs in a Python (when python3 is here)", async () => {
  const { spawnSync } = await import("child_process");
  const c = chooseInterpreter({});
  const p = probeArgv(c);
  const r = spawnSync(p.command, p.args, { encoding: "utf8" });
  if (r.error) return; // no python3 on this machine: nothing to check
  const res = parseProbe(r.status, r.stdout, r.stderr);
  assert.ok(res.ok || (!res.ok && res.reason === "missing-module"), JSON.stringify(res));
});

test("install commands quote paths for the terminal", () => {
  const c = chooseInterpreter({ setting: "/opt/my envs/bin/python" });
  assert.equal(installCommand(c, { kind: "pypi" }), "'/opt/my envs/bin/python' -m pip install forge-lsp");
  assert.equal(installCommand(chooseInterpreter({ setting: "/usr/bin/python3" }), { kind: "path", path: "/src/forge-lsp" }),
    "/usr/bin/python3 -m pip install -e /src/forge-lsp");
  assert.equal(installCommand(chooseInterpreter({ setting: "C:\\Program Files\\Py\\python.exe" }), { kind: "pypi" }, "win32"),
    "& 'C:\\Program Files\\Py\\python.exe' -m pip install forge-lsp");
  assert.equal(shellQuote("it's"), "'it'\\''s'");
});

test("a forge-lsp checkout is recognized from its pyproject.toml", () => {
  assert.equal(isForgeCheckout('[project]\nname = "forge-lsp"\nversion = "0.1.0"\n'), true);
  assert.equal(isForgeCheckout('[project]\nname = "other"\n'), false);
});
