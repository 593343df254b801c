// package.json and the bundle agree with the code: commands, menus, settings, the entry point.

import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "fs";
import * as path from "path";
import Module = require("module");
import { SERVER_DEFAULTS } from "../src/config";

const ROOT = path.resolve(__dirname, "..", "..");
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, "package.json"), "utf8"));
const source = fs.readdirSync(path.join(ROOT, "src"), { recursive: true })
  .filter((f) => String(f).endsWith(".ts"))
  .map((f) => fs.readFileSync(path.join(ROOT, "src", String(f)), "utf8"))
  .join("\n");

test("engines: the oldest VS Code the code needs (vscode-languageclient's floor), matching the API types it is built against", () => {
  // the extension uses no API newer than vscode-languageclient's own requirement; VS Code builds that lag
  // behind (code-server, VSCodium, ...) refuse an extension whose engines.vscode is newer than they are
  const client = JSON.parse(fs.readFileSync(path.join(ROOT, "node_modules", "vscode-languageclient", "package.json"), "utf8"));
  assert.equal(pkg.engines.vscode, client.engines.vscode);
  assert.equal(pkg.engines.vscode, `^${pkg.devDependencies["@types/vscode"]}`);
  const [major, minor] = pkg.engines.vscode.replace("^", "").split(".").map(Number);
  assert.ok(major === 1 && minor <= 139, "installable in code-server 4.139.1 (VS Code 1.139.1), which the e2e test uses");
});

test("entry point and activation", () => {
  assert.equal(pkg.main, "./dist/extension.js");
  assert.ok(pkg.activationEvents.includes("onLanguage:python"));
  assert.ok(pkg.activationEvents.includes("onLanguage:cuda-cpp"));
});

test("every registered command is contributed, and every contributed command is registered", () => {
  const registered = new Set([...source.matchAll(/registerCommand\("([^"]+)"/g)].map((m) => m[1]));
  const contributed = new Set<string>(pkg.contributes.commands.map((c: { command: string }) => c.command));
  assert.deepEqual([...registered].filter((c) => !contributed.has(c)), []);
  assert.deepEqual([...contributed].filter((c) => !registered.has(c)), []);
  // the server's commands are registered by vscode-languageclient: never contributed twice
  for (const c of contributed) assert.ok(!["forge.optimize", "forge.accept", "forge.reject", "forge.showDiff", "forge.cancel"].includes(c), c);
});

test("menus and keybindings only name contributed commands (or the view's focus command)", () => {
  const contributed = new Set<string>(pkg.contributes.commands.map((c: { command: string }) => c.command));
  const used: string[] = [...pkg.contributes.keybindings.map((k: { command: string }) => k.command)];
  for (const items of Object.values(pkg.contributes.menus) as Array<Array<{ command: string }>>) used.push(...items.map((i) => i.command));
  assert.deepEqual(used.filter((c) => !contributed.has(c)), []);
  assert.ok(source.includes('"forge.runs.focus"'));
  assert.equal(pkg.contributes.views.forge[0].id, "forge.runs");
});

test("settings: every server setting is contributed with the server's default", () => {
  const props = pkg.contributes.configuration.properties;
  for (const [key, value] of Object.entries(SERVER_DEFAULTS)) {
    assert.ok(`forge.${key}` in props, `forge.${key}`);
    assert.deepEqual(props[`forge.${key}`].default, value, `forge.${key} default`);
  }
  for (const key of ["forge.interpreter", "forge.diffMode", "forge.search"]) assert.ok(key in props, key);
  assert.deepEqual(props["forge.search"].enum, ["mcts", "linear"]);
  for (const key of Object.keys(props)) assert.ok(!/apiKey$|token|secret/i.test(key), `${key}: no setting holds a secret`);
});

test("the bundle loads (against a stub vscode) and exports activate/deactivate", () => {
  const bundle = path.join(ROOT, "dist", "extension.js");
  assert.ok(fs.existsSync(bundle), "dist/extension.js (npm run build)");
  const stub: any = new Proxy(function () {}, {
    get: (_t, prop) => (prop === "__esModule" ? true : stub),
    apply: () => stub,
    construct: () => stub,
  });
  const original = (Module as any)._load;
  (Module as any)._load = function (request: string, ...rest: unknown[]) {
    return request === "vscode" ? stub : original.call(this, request, ...rest);
  };
  try {
    const ext = require(bundle);
    assert.equal(typeof ext.activate, "function");
    assert.equal(typeof ext.deactivate, "function");
  } finally {
    (Module as any)._load = original;
  }
});
