// A scripted OpenAI-compatible chat server on 127.0.0.1 (node's http module), mirroring
// tests/fake_openai.py: each POST .../chat/completions consumes one scripted reply; an empty
// script answers 418 so an under-scripted test fails loudly; every request is recorded.

import * as http from "http";
import { AddressInfo } from "net";

export interface Recorded {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: unknown;
}

/** A reply: its text, or a function giving it when the request comes (e.g. from a file the run wrote by then). */
export type Entry = string | { content?: string | (() => string); delay?: number; status?: number; error?: string };

export class FakeOpenAI {
  readonly requests: Recorded[] = [];
  private queue: Entry[] = [];
  private server: http.Server;
  private counter = 0;
  private timers = new Set<NodeJS.Timeout>();

  constructor() {
    this.server = http.createServer((req, res) => this.handle(req, res));
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    return this;
  }

  get baseUrl(): string {
    const addr = this.server.address() as AddressInfo;
    return `http://127.0.0.1:${addr.port}/v1`;
  }

  script(...entries: Entry[]): void {
    this.queue.push(...entries);
  }

  get pending(): number {
    return this.queue.length;
  }

  chatRequests(): Recorded[] {
    return this.requests.filter((r) => r.method === "POST" && r.path.endsWith("/chat/completions"));
  }

  async close(): Promise<void> {
    for (const t of this.timers) clearTimeout(t);
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const raw = Buffer.concat(chunks).toString("utf8");
      let body: unknown = null;
      try {
        body = raw ? JSON.parse(raw) : null;
      } catch {
        body = raw;
      }
      const path = req.url ?? "/";
      this.requests.push({ method: req.method ?? "", path, headers: req.headers, body });
      if (req.method === "GET" && path.replace(/\/$/, "").endsWith("/models")) {
        this.send(res, 200, { object: "list", data: [{ id: "fake-model", object: "model", created: 0, owned_by: "fake" }] });
        return;
      }
      if (req.method !== "POST" || !path.replace(/\/$/, "").endsWith("/chat/completions")) {
        this.send(res, 404, { error: { message: `no route ${path}`, type: "invalid_request_error", param: null, code: null } });
        return;
      }
      const entry = this.queue.shift();
      if (entry === undefined) {
        this.send(res, 418, { error: { message: "fake_openai: no scripted reply left for this request", type: "server_error", param: null, code: null } });
        return;
      }
      const e = typeof entry === "string" ? { content: entry } : entry;
      const reply = () => {
        if (e.status && e.status !== 200) {
          this.send(res, e.status, { error: { message: e.error ?? "error", type: "server_error", param: null, code: null } });
          return;
        }
        const model = (body as { model?: string } | null)?.model ?? "fake-model";
        this.send(res, 200, {
          id: `chatcmpl-fake-${++this.counter}`,
          object: "chat.completion",
          created: Math.floor(Date.now() / 1000),
          model,
          choices: [{ index: 0, message: { role: "assistant", content: (typeof e.content === "function" ? e.content() : e.content) ?? "{}", refusal: null }, finish_reason: "stop", logprobs: null }],
          usage: { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 },
        });
      };
      if (e.delay) {
        const t = setTimeout(() => {
          this.timers.delete(t);
          reply();
        }, e.delay * 1000);
        this.timers.add(t);
      } else reply();
    });
  }

  private send(res: http.ServerResponse, status: number, payload: unknown): void {
    const data = Buffer.from(JSON.stringify(payload));
    try {
      res.writeHead(status, { "Content-Type": "application/json", "Content-Length": String(data.length) });
      res.end(data);
    } catch {
      // the client went away
    }
  }
}
