import { test } from "node:test";
import * as assert from "node:assert/strict";
import {
  apiKeyEnvName, configurationAnswer, describeEnv, initializationOptions, needsRestart, redact, SERVER_DEFAULTS, serverEnv,
  serverSettings,
} from "../src/config";

const getter = (values: Record<string, unknown>) => (key: string) => values[key];
const SECRET = "sk-test-abcdefghijklmnop";

test("defaults: unset settings give the server's defaults, optional ones as null", () => {
  assert.deepEqual(serverSettings(getter({})), SERVER_DEFAULTS);
});

test("user settings pass through with the server's names (camelCase)", () => {
  const s = serverSettings(getter({
    model: " gpt-4o ", baseUrl: "http://localhost:11434/v1", judgeModel: "o4-mini", search: "linear", rounds: 3,
    budgetUsd: 0.5, wallS: 120, concurrency: 2, device: "cuda:1", executor: "ray://head:10001", workers: 1,
    offline: false, profile: false, strict: true,
  }));
  assert.deepEqual(s, {
    model: "gpt-4o", baseUrl: "http://localhost:11434/v1", judgeModel: "o4-mini", apiKeyEnv: "OPENAI_API_KEY",
    search: "linear", rounds: 3, budgetUsd: 0.5, wallS: 120, concurrency: 2, device: "cuda:1",
    executor: "ray://head:10001", workers: 1, offline: false, profile: false, strict: true,
  });
});

test("invalid values fall back to defaults; empty strings are unset", () => {
  const s = serverSettings(getter({
    model: "", search: "random", rounds: 0, concurrency: 2.5, workers: 99, budgetUsd: -1, wallS: 0, device: "  ",
    offline: "yes", apiKeyEnv: "NOT A NAME", executor: "slurm", strict: "yes",
  }));
  assert.equal(s.strict, false);
  assert.equal(s.executor, "local");
  assert.equal(s.model, null);
  assert.equal(s.search, "mcts");
  assert.equal(s.rounds, 10);
  assert.equal(s.concurrency, 4);
  assert.equal(s.workers, 2);
  assert.equal(s.budgetUsd, null);
  assert.equal(s.wallS, null);
  assert.equal(s.device, "auto");
  assert.equal(s.offline, true);
  assert.equal(s.apiKeyEnv, "OPENAI_API_KEY");
  assert.equal(serverSettings(getter({ budgetUsd: 0 })).budgetUsd, 0, "a zero budget is a budget");
});

test("client-only settings never reach the server (it would warn about unknown settings)", () => {
  const s = serverSettings(getter({ interpreter: "/usr/bin/python3", diffMode: "sideBySide", logLevel: "DEBUG", trace: { server: "verbose" } }));
  for (const k of ["interpreter", "diffMode", "logLevel", "trace"]) assert.ok(!(k in s), k);
});

test("initializationOptions and workspace/configuration: {forge: {...}}, nothing else", () => {
  const get = getter({ model: "m", rounds: 2 });
  assert.deepEqual(initializationOptions(get), { forge: serverSettings(get) });
  assert.deepEqual(configurationAnswer("forge", get), serverSettings(get));
  assert.equal(configurationAnswer("forge.rounds", get), 2);
  assert.equal(configurationAnswer("forge.interpreter", get), null);
  assert.equal(configurationAnswer("python", get), undefined, "other sections are left to VS Code");
  assert.equal(configurationAnswer(undefined, get), undefined);
});

test("the API key never appears in settings, init options or configuration answers — even if the user puts it in a setting", () => {
  const get = getter({ model: "m", apiKey: SECRET, api_key: SECRET, key: SECRET, token: SECRET, openaiApiKey: SECRET });
  for (const value of [serverSettings(get), initializationOptions(get), configurationAnswer("forge", get)]) {
    assert.ok(!JSON.stringify(value).includes(SECRET));
    const keys = Object.keys((value as { forge?: object }).forge ?? (value as object));
    assert.deepEqual(keys.filter((k) => /key|token|secret/i.test(k)), ["apiKeyEnv"], "only the variable's NAME");
  }
});

test("the environment carries the stored key under the configured name, and only there", () => {
  const base = { PATH: "/usr/bin", HOME: "/home/u", OPENAI_API_KEY: "inherited" };
  const env = serverEnv({ base, apiKey: SECRET, get: getter({}) });
  assert.equal(env.OPENAI_API_KEY, SECRET, "a stored key wins over an inherited one");
  assert.equal(env.PATH, "/usr/bin");
  const named = serverEnv({ base: { PATH: "/usr/bin" }, apiKey: SECRET, get: getter({ apiKeyEnv: "MY_LLM_KEY" }) });
  assert.equal(named.MY_LLM_KEY, SECRET);
  assert.equal(named.OPENAI_API_KEY, undefined);
  assert.equal(Object.values(named).filter((v) => v === SECRET).length, 1);
  const none = serverEnv({ base, get: getter({}) });
  assert.equal(none.OPENAI_API_KEY, "inherited", "no stored key: the inherited one stays");
  const level = serverEnv({ base: {}, get: getter({ logLevel: "DEBUG" }) });
  assert.equal(level.FORGE_LSP_LOG_LEVEL, "DEBUG");
  assert.equal(serverEnv({ base: {}, get: getter({ logLevel: "LOUD" }) }).FORGE_LSP_LOG_LEVEL, undefined);
  assert.equal(apiKeyEnvName(getter({ apiKeyEnv: "X Y" })), "OPENAI_API_KEY");
});

test("describing the environment for the log masks secrets", () => {
  const base = { PATH: "/usr/bin" };
  const env = serverEnv({ base, apiKey: SECRET, get: getter({ apiKeyEnv: "MY_LLM" }) });
  env.GITHUB_TOKEN = "ghp_x";
  const text = describeEnv(env, base, ["MY_LLM"]);
  assert.ok(!text.includes(SECRET));
  assert.ok(!text.includes("ghp_x"));
  assert.match(text, /MY_LLM=<set, hidden>/);
  assert.match(text, /PYTHONUNBUFFERED=1/);
  assert.ok(!text.includes("PATH="), "unchanged variables are not listed");
  assert.equal(redact(`Bearer ${SECRET} done`, [SECRET, undefined]), "Bearer <redacted> done");
});

test("which setting changes restart the server (new process) and which are pushed", () => {
  const changed = (keys: string[]) => (k: string) => keys.includes(k);
  assert.equal(needsRestart(changed(["interpreter"])), true);
  assert.equal(needsRestart(changed(["apiKeyEnv"])), true);
  assert.equal(needsRestart(changed(["logLevel"])), true);
  assert.equal(needsRestart(changed(["rounds", "model"])), false);
});
