/* forge run report: the page's own script. Reads the inlined data (gzip + base64), draws the candidate tree,
   the charts (uPlot), the roofline, the candidate table and one candidate at a time. No network. */
(function () {
  "use strict";
  const COLORS = {
    correct: "#1a7f37", incorrect: "#d1500a", compile_error: "#cf222e", runtime_error: "#bf3989",
    timeout: "#7d4e2d", crashed: "#6639ba", out_of_memory: "#0550ae", pending: "#8c959f",
    cancelled: "#afb8c1", unreadable: "#6e7781", reference: "#24292f",
  };
  const LABELS = {
    correct: "correct", incorrect: "incorrect", compile_error: "compile error", runtime_error: "runtime error",
    timeout: "timeout", crashed: "crashed", out_of_memory: "out of memory", pending: "pending (run going on)",
    cancelled: "never evaluated (run ended)", unreadable: "verdict unreadable",
  };
  let D = null;
  let byId = new Map();
  let selected = null;

  // ------------------------------------------------------------------------------------------ helpers
  function h(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }
  const S = (tag, attrs) => {
    const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    return e;
  };
  const T = (i) => (i === null || i === undefined ? "" : D.texts[i]);
  const fx = (v) => (v === null || v === undefined ? "–" : v >= 9.995 ? `${v.toFixed(0)}×` : `${v.toFixed(2)}×`);
  /** A speedup under 1 said as the slowdown it is: 0.0021 -> "476× slower", never "0.00×". */
  const slowdown = (v) => (v === null || v === undefined || v <= 0 ? "–" : v >= 0.995 ? fx(v) : `${fx(1 / v)} slower`);
  /** `text` cut to at most `n` characters at a word's end, with an ellipsis when cut. */
  const words = (text, n) => {
    if (text.length <= n) return text;
    const cut = text.slice(0, n + 1).replace(/\s+\S*$/, "");
    return `${cut || text.slice(0, n)}…`;
  };
  const fms = (v) => (v === null || v === undefined ? "–" : v < 1 ? `${(v * 1000).toFixed(1)} µs` : `${v.toFixed(3)} ms`);
  const fs = (v) => (v === null || v === undefined ? "–" : v < 120 ? `${v.toFixed(1)} s` : `${(v / 60).toFixed(1)} min`);
  const fci = (ci) => (ci ? `[${ci[0].toFixed(2)}, ${ci[1].toFixed(2)}]` : "");
  const badge = (state) => h("span", { class: `state st-${state}`, text: LABELS[state] || state });
  const num = (v, digits) => (v === null || v === undefined ? "–" : Number(v).toFixed(digits));
  function pre(text, cls) { return h("pre", { class: cls || null }, h("code", { text })); }

  async function load() {
    const b64 = document.getElementById("forge-data").textContent.trim();
    const bin = atob(b64);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }

  // ------------------------------------------------------------------------------------------ summary
  function summary() {
    const box = document.getElementById("summary");
    if (!box) return;
    if (!D.run_id && !D.candidates.length && D.model_wide) return modelWideSummary(box, D.model_wide);
    const counts = {};
    for (const c of D.candidates) counts[c.state] = (counts[c.state] || 0) + 1;
    const best = D.best ? byId.get(D.best) : null;
    const evalS = D.cost.length ? D.cost[D.cost.length - 1].eval_s : 0;
    const timedS = D.cost.length ? D.cost[D.cost.length - 1].timed_s : 0;
    const card = (k, v, n, cls) => h("div", { class: `card${cls ? " " + cls : ""}` }, h("div", { class: "k", text: k }), h("div", { class: "v", text: v }), n ? h("div", { class: "n", text: n }) : null);
    const rounds = D.rounds.length ? D.rounds[D.rounds.length - 1].x : 0;
    const faster = best && best.speedup !== null && best.speedup > 1;  // "best" is never a slowdown
    box.append(
      card("outcome", D.outcome || D.status, D.final ? `final re-timing: ${slowdown(D.final.speedup)}` : "", `wide outcome-${D.outcome_kind || "none"}`),
      card(faster ? "best (search)" : "fastest (search)", best ? (faster ? fx(best.speedup) : slowdown(best.speedup)) : "none",
        best ? `${best.id} · ${words(best.summary, 60)}` : "no correct candidate"),
      card("final re-timing", D.final ? slowdown(D.final.speedup) : "–", D.final ? `${D.final.candidate} ${fci(D.final.ci95)} · ${fms(D.final.reference_ms)} → ${fms(D.final.candidate_ms)}` : "not re-timed"),
      card("candidates", String(D.candidates.length), Object.entries(counts).map(([k, v]) => `${v} ${LABELS[k] || k}`).join(", ")),
      card("rounds", String(rounds), D.config.search ? `search: ${D.config.search}` : ""),
      card("model calls", String(D.calls.length), `${D.tokens_in} tokens in / ${D.tokens_out} out`),
      card("dollars", D.spent_usd === null ? "not recorded" : `$${D.spent_usd.toFixed(4)}`, D.spent_usd === null ? "no price known" : "known prices"),
      card(D.cost_timed_label.startsWith("GPU") ? "GPU time" : "timed CPU time", timedS < 1 ? `${(timedS * 1000).toFixed(0)} ms` : fs(timedS), "the timed calls, measured"),
      card("evaluation time", fs(evalS), "worker stages, all candidates"),
      card("device", D.device || "–", D.backend ? `backend: ${D.backend}` : ""),
      card("wall time", fs(D.updated - D.created), new Date(D.created * 1000).toLocaleString()),
    );
  }

  /** The cards of a model-wide result's own page: what the model-wide run did, not a run's search. */
  function modelWideSummary(box, M) {
    const card = (k, v, n, cls) => h("div", { class: `card${cls ? " " + cls : ""}` }, h("div", { class: "k", text: k }), h("div", { class: "v", text: v }), n ? h("div", { class: "n", text: n }) : null);
    const C = M.check;
    const kept = M.modules.filter((m) => m.status === "kept").length;
    const slower = C && C.speedup !== null && C.speedup !== undefined && C.speedup < 1;
    const outcome = (M.outcome || "nothing_kept").replace("_", " ");
    box.append(
      card("outcome", outcome, M.state === "interrupted" ? "interrupted: resume with forge optimize --model-wide --resume" : (M.patch_file ? "a patch was written" : "the model is unchanged"),
        M.outcome === "kept" ? "good" : (M.outcome === "inconclusive" || M.state === "interrupted" ? "warn" : "")),
      card("modules", `${kept} of ${M.modules.length} kept`, M.modules.map((m) => `${m.name}: ${m.status}`).join(" · ")),
      card("end to end", C && C.speedup ? slowdown(C.speedup) : "–", C ? (C.ci ? `99% CI ${fci(C.ci)} · ${num(C.before_ms, 3)} → ${num(C.after_ms, 3)} ms` : (C.decision && C.decision.says) || "nothing kept") : "not checked",
        slower ? "bad" : ""),
      card("compile mode", C && C.model_mode ? C.model_mode : "none", C && (C.model_modes || []).length ? `${C.model_modes.length} tried` : "none tried"),
      card("device", M.device || "–", M.timer ? `${M.timer} time` : ""),
      card("hot spots", `${M.hot_classes.length} classes`, `${num(M.model_ms, 3)} ms per forward · ${M.iterations} profiled`),
    );
  }

  // --------------------------------------------------------------------------------------------- tree
  function tree() {
    const box = document.getElementById("tree");
    const legend = document.getElementById("legend");
    if (!box) return;
    const present = new Set(D.candidates.map((c) => c.state));
    for (const [k, label] of Object.entries(LABELS)) {
      if (present.has(k)) {
        const s = h("span", { text: label });
        s.style.setProperty("--c", COLORS[k]);
        legend.append(s);
      }
    }
    const kids = new Map();
    kids.set("@ref", []);
    for (const c of D.candidates) kids.set(c.id, []);
    for (const c of D.candidates) (kids.get(c.parent && byId.has(c.parent) ? c.parent : "@ref")).push(c.id);
    const ROW = 22, COL = 112, PAD = 14;
    const pos = new Map();
    let leaf = 0, maxDepth = 0;
    // iterative post-order layout (deep chains must not overflow the stack)
    const stack = [["@ref", 0, false]];
    while (stack.length) {
      const [id, depth, done] = stack.pop();
      const ch = kids.get(id) || [];
      maxDepth = Math.max(maxDepth, depth);
      if (!done && ch.length) {
        stack.push([id, depth, true]);
        for (let i = ch.length - 1; i >= 0; i--) stack.push([ch[i], depth + 1, false]);
        continue;
      }
      let y;
      if (!ch.length) y = leaf++;
      else y = (pos.get(ch[0]).y + pos.get(ch[ch.length - 1]).y) / 2;
      pos.set(id, { x: depth, y });
    }
    const width = PAD * 2 + maxDepth * COL + 110;
    const height = PAD * 2 + Math.max(1, leaf) * ROW;
    const svg = S("svg", { width, height, viewBox: `0 0 ${width} ${height}` });
    const X = (p) => PAD + 8 + p.x * COL;
    const Y = (p) => PAD + p.y * ROW + ROW / 2;
    const edges = S("g", {});
    const nodes = S("g", {});
    for (const [id, ch] of kids) {
      const a = pos.get(id);
      for (const cid of ch) {
        const b = pos.get(cid);
        const c = byId.get(cid);
        const mid = X(a) + COL / 2;
        edges.append(S("path", { class: c.correct ? "edge" : "edge failed", d: `M${X(a)},${Y(a)} H${mid} V${Y(b)} H${X(b)}` }));
      }
    }
    const addNode = (id, state, label, title) => {
      const p = pos.get(id);
      const inner = (kids.get(id) || []).length > 0;
      const g = S("g", { class: "node", "data-id": id, tabindex: 0, role: "treeitem", transform: `translate(${X(p)},${Y(p)})` });
      const circle = S("circle", { r: 7, fill: COLORS[state] || "#6e7781" });
      const t = S("title", {});
      t.textContent = title;
      const text = S("text", inner ? { x: 10, y: -9, class: "inner" } : { x: 11, y: 0 });
      text.textContent = label;
      g.append(circle, text, t);
      nodes.append(g);
      return g;
    };
    addNode("@ref", "reference", "reference", `${D.model_class}: the task's module`).addEventListener("click", () => select("@ref"));
    for (const c of D.candidates) {
      const label = c.correct ? `${c.id} ${slowdown(c.speedup)}` : `${c.id} ${c.state === "pending" || c.state === "cancelled" ? "…" : "✗"}`;
      const g = addNode(c.id, c.state, label, `${c.id} · ${LABELS[c.state] || c.state}${c.speedup ? ` · ${slowdown(c.speedup)}` : ""}\n${c.summary}`);
      if (c.best) g.classList.add("best");
      g.addEventListener("click", () => select(c.id));
      g.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); select(c.id); } });
    }
    svg.append(edges, nodes);
    box.append(svg);
  }

  // ---------------------------------------------------------------------------------------- candidate
  function diffView(oldText, newText, oldName, newName) {
    if (oldText === newText) return h("p", { class: "muted", text: `No difference between ${oldName} and ${newName}.` });
    const patch = Diff.structuredPatch(oldName, newName, oldText, newText, "", "", { context: 3 });
    const code = h("code", {});
    for (const hunk of patch.hunks) {
      code.append(h("span", { class: "hunk", text: `@@ -${hunk.oldStart},${hunk.oldLines} +${hunk.newStart},${hunk.newLines} @@` }));
      for (const line of hunk.lines) {
        const cls = line[0] === "+" ? "add" : line[0] === "-" ? "del" : null;
        code.append(cls ? h("span", { class: cls, text: line }) : document.createTextNode(line + "\n"));
      }
    }
    return h("pre", { class: "diff" }, code);
  }

  function highlighted(text) {
    const code = h("code", { class: "hljs language-python" });
    try {
      code.innerHTML = hljs.highlight(text, { language: "python", ignoreIllegals: true }).value;
    } catch (e) {
      code.textContent = text;
    }
    return h("pre", { class: "source" }, code);
  }

  function sourceTabs(c) {
    const src = T(c.source);
    const parent = c.parent ? byId.get(c.parent) : null;
    const parentText = parent ? T(parent.source) : T(D.reference);
    const parentName = parent ? parent.id : "reference";
    const views = [["Source", () => highlighted(src)]];
    if (parent) views.push([`Diff to ${parentName}`, () => diffView(parentText, src, parentName, c.id)]);
    views.push(["Diff to the reference", () => diffView(T(D.reference), src, "reference", c.id)]);
    const body = h("div", { class: "tab-body" });
    const bar = h("div", { class: "tabs", role: "tablist" });
    const buttons = views.map(([label, make], i) => h("button", {
      role: "tab", "aria-selected": i === 0 ? "true" : "false", text: label,
      onclick: (e) => {
        for (const b of buttons) b.setAttribute("aria-selected", "false");
        e.currentTarget.setAttribute("aria-selected", "true");
        body.replaceChildren(make());
      },
    }));
    bar.append(...buttons);
    body.append(views[0][1]());
    return h("div", {}, bar, body);
  }

  function verdictPart(c) {
    const out = [];
    out.push(h("h4", { text: "Verdict" }));
    if (c.state === "pending" || c.state === "cancelled") {
      out.push(h("p", { class: "muted", text: c.state === "pending" ? "Not evaluated yet." : "Never evaluated: the run ended first (cancelled, interrupted or out of budget)." }));
      return out;
    }
    out.push(h("p", {}, badge(c.state), c.failed_check ? ` failed check: ${c.failed_check}` : "", c.reused ? ` (the same source as ${c.reused}: its verdict)` : ""));
    if (c.reason) out.push(pre(c.reason));
    if (c.checks.length) {
      out.push(h("table", { class: "checks" },
        h("thead", {}, h("tr", {}, h("th", { text: "check" }), h("th", { text: "" }), h("th", { text: "detail" }), h("th", { text: "s" }))),
        h("tbody", {}, c.checks.map((k) => h("tr", {},
          h("td", { text: k.name }), h("td", { class: k.passed ? "ok" : "bad", text: k.passed ? "✓" : "✗" }),
          h("td", { text: k.detail }), h("td", { class: "num", text: k.seconds === null ? "" : k.seconds.toFixed(2) }))))));
    }
    if (c.mismatch) {
      const m = c.mismatch;
      out.push(h("h4", { text: "Worst mismatch" }));
      out.push(h("table", { class: "kv" }, h("tbody", {}, Object.entries(m).map(([k, v]) =>
        h("tr", {}, h("th", { text: k }), h("td", { text: Array.isArray(v) ? `[${v.join(", ")}]` : String(v) }))))));
    }
    if (c.timing) {
      const t = c.timing;
      out.push(h("h4", { text: "Timing" }));
      out.push(h("table", { class: "timing" },
        h("thead", {}, h("tr", {}, h("th", { text: "" }), h("th", { text: "median" }), h("th", { text: "p10 – p90" }))),
        h("tbody", {},
          h("tr", {}, h("th", { text: "reference" }), h("td", { class: "num", text: fms(t.reference_ms) }), h("td", { class: "num", text: `${fms(t.reference_p10_p90[0])} – ${fms(t.reference_p10_p90[1])}` })),
          h("tr", {}, h("th", { text: c.id }), h("td", { class: "num", text: fms(t.candidate_ms) }), h("td", { class: "num", text: `${fms(t.candidate_p10_p90[0])} – ${fms(t.candidate_p10_p90[1])}` })),
          h("tr", {}, h("th", { text: "speedup" }), h("td", { class: "num", text: slowdown(t.speedup) }), h("td", { text: `95% CI ${fci(t.ci95)} · ${t.n} runs each, interleaved · ${t.mode}` })))));
      for (const note of t.notes) out.push(h("p", { class: "muted", text: note }));
    }
    if (Object.keys(c.stages).length) {
      out.push(h("p", { class: "muted", text: "Stages: " + Object.entries(c.stages).map(([k, v]) => `${k} ${v.toFixed(2)} s`).join(" · ") }));
    }
    if (c.log_excerpt) out.push(h("details", {}, h("summary", { text: "Log excerpt" }), pre(c.log_excerpt)));
    if (c.traceback) out.push(h("details", {}, h("summary", { text: "Traceback" }), pre(c.traceback)));
    return out;
  }

  function findingsPart(c) {
    const out = [h("h4", { text: "Profiler findings" })];
    if (!c.profiled) {
      out.push(h("p", { class: "muted", text: "Not profiled." }));
      return out;
    }
    if (c.pct_of_roof !== null && c.pct_of_roof !== undefined) out.push(h("p", { text: `${c.pct_of_roof.toFixed(0)}% of the roofline` }));
    if (!c.findings.length) out.push(h("p", { class: "muted", text: "Profiled; no findings recorded." }));
    for (const f of c.findings) {
      out.push(h("div", { class: "finding" },
        h("p", {}, h("b", { text: f.title }), f.rule ? h("span", { class: "muted", text: ` (${f.rule}${f.severity !== null ? `, severity ${f.severity.toFixed(2)}` : ""})` }) : null),
        f.suggestion ? h("p", { text: f.suggestion }) : null,
        Object.keys(f.evidence).length ? h("p", { class: "muted", text: Object.entries(f.evidence).map(([k, v]) => `${k}: ${typeof v === "number" ? Number(v.toPrecision(4)) : v}`).join(" · ") }) : null,
        f.lines.length ? h("table", {}, h("tbody", {}, f.lines.map((l) => h("tr", {},
          h("td", { text: `${l.file.split("/").pop()}:${l.line}` }), h("td", { class: "num", text: `${l.stall_pct.toFixed(1)}%` }),
          h("td", { text: l.dominant_stall }), h("td", {}, h("code", { text: l.source })))))) : null));
    }
    return out;
  }

  function callView(i) {
    const call = D.calls[i];
    const head = `${call.role} · ${call.model} · ${call.prompt_tokens} + ${call.completion_tokens} tokens` +
      `${call.cost_usd !== null ? ` · $${call.cost_usd.toFixed(4)}` : ""} · ${call.latency_s.toFixed(1)} s` +
      `${call.error ? ` · failed: ${call.error.slice(0, 120)}` : ""}`;
    const d = h("details", { class: "call" }, h("summary", { text: head }));
    d.addEventListener("toggle", () => {
      if (!d.open || d.dataset.filled) return;
      d.dataset.filled = "1";
      for (const m of call.messages) d.append(h("p", { class: "muted", text: m.role }), pre(T(m.content)));
      d.append(h("p", { class: "muted", text: "reply" }), pre(T(call.reply) || "(no reply)"));
    });
    return d;
  }

  function referencePanel() {
    return [
      h("h3", {}, "Reference ", h("code", { text: D.model_class })),
      h("p", { class: "muted", text: D.task_path }),
      highlighted(T(D.reference)),
      D.loose_calls.length ? h("h4", { text: "Model calls that made no candidate" }) : null,
      ...D.loose_calls.map(callView),
    ];
  }

  function select(id) {
    selected = id;
    for (const g of document.querySelectorAll("#tree .node")) {
      const on = g.dataset.id === id;
      g.classList.toggle("selected", on);
      if (on) {  // bring it into the tree's view without scrolling the page
        const box = document.getElementById("tree");
        const r = g.getBoundingClientRect(), b = box.getBoundingClientRect();
        if (r.top < b.top || r.bottom > b.bottom) box.scrollTop += r.top - b.top - box.clientHeight / 2;
        if (r.left < b.left || r.right > b.right) box.scrollLeft += r.left - b.left - box.clientWidth / 3;
      }
    }
    for (const tr of document.querySelectorAll("table.cands tbody tr")) tr.classList.toggle("selected", tr.dataset.id === id);
    const panel = document.getElementById("candidate");
    panel.dataset.candidate = id;
    if (id === "@ref") {
      panel.replaceChildren(...referencePanel().filter(Boolean));
      return;
    }
    const c = byId.get(id);
    const parts = [
      h("h3", {}, h("span", { class: "cand-id", text: c.id }), " ", badge(c.state), c.correct ? ` ${slowdown(c.speedup)} ` : " ",
        c.timing ? h("span", { class: "muted", text: fci(c.timing.ci95) }) : null, c.best ? " ★ best" : ""),
      h("p", { class: "summary", text: c.summary }),
      h("p", { class: "muted", text: `origin ${c.origin} · parent ${c.parent || "reference"} · round ${c.round} · queued at ${fs(c.t_created)}${c.t_evaluated !== null ? `, evaluated at ${fs(c.t_evaluated)}` : ""}${c.backend ? ` · ${c.backend}` : ""}${c.device ? ` on ${c.device}` : ""}` }),
    ];
    if (c.instruction !== null) parts.push(h("details", {}, h("summary", { text: "The Judge's instruction to the Coder" }), pre(T(c.instruction))));
    parts.push(...verdictPart(c), sourceTabs(c), ...findingsPart(c));  // the verdict first, above the fold
    parts.push(h("h4", { text: "Model calls" }));
    if (c.calls.length) parts.push(...c.calls.map(callView));
    else parts.push(h("p", { class: "muted", text: c.origin.startsWith("offline") ? "None: an offline candidate (no model)." : "None recorded." }));
    panel.replaceChildren(...parts);
  }

  // ------------------------------------------------------------------------------------------- charts
  function empty(box, text) { box.replaceChildren(h("div", { class: "empty", text })); }
  /** A chart with nothing to draw: no empty box, one line that says why in its place. */
  function hide(box, text) { box.replaceWith(h("p", { class: "muted chart-why", id: box.id, text })); }
  function width(box) { return Math.max(300, (box.clientWidth || 480) - 10); }
  const stepped = () => uPlot.paths.stepped({ align: 1 });
  const padded = { time: false, range: (u, min, max) => (min === max ? [min - 1, max + 1] : [min, max]) };
  const dots = { paths: () => null, points: { show: true, size: 7 } };

  function charts() {
    const rounds = document.getElementById("chart-rounds");
    if (!rounds) return;
    if (D.rounds.length < 2) hide(rounds, D.rounds.length ? "One round only (the offline candidates): the speedup over time is on the right." : "No round yet.");
    else if (!D.rounds.some((p) => p.y !== null)) empty(rounds, "No correct candidate yet: no speedup to show.");
    else new uPlot({ width: width(rounds), height: 220, scales: { x: padded },
      axes: [{ label: "round" }, { label: "speedup ×" }],
      series: [{ label: "round" }, { label: "best speedup", stroke: "#1a7f37", width: 2, paths: stepped(), points: { show: true } }] },
    [D.rounds.map((p) => p.x), D.rounds.map((p) => p.y)], rounds);

    const time = document.getElementById("chart-time");
    const ev = D.candidates.filter((c) => c.t_evaluated !== null).sort((a, b) => a.t_evaluated - b.t_evaluated);
    if (!ev.length) empty(time, "No candidate evaluated yet.");
    else {
      let best = null;
      const bests = ev.map((c) => { if (c.correct && c.speedup !== null && (best === null || c.speedup > best)) best = c.speedup; return best; });
      new uPlot({ width: width(time), height: 220, scales: { x: padded },
        axes: [{ label: "seconds since the run started" }, { label: "speedup ×" }],
        series: [{ label: "s" }, { label: "best so far", stroke: "#1a7f37", width: 2, paths: stepped() },
          { label: "each correct candidate", stroke: "#0969da", fill: "#0969da", ...dots }] },
      [ev.map((c) => c.t_evaluated), bests, ev.map((c) => (c.correct ? c.speedup : null))], time);
    }

    const cost = document.getElementById("chart-cost");
    const notes = document.getElementById("cost-notes");
    for (const n of D.cost_notes) notes.append(h("li", { text: n }));
    const pts = D.cost;
    const hasUsd = pts.some((p) => p.usd !== null);
    const hasTokens = pts.some((p) => p.tokens);  // no model call: no tokens axis, said in a note instead
    if (!pts.length) { hide(cost, "Nothing evaluated yet: no cost to show."); return; }
    const series = [{ label: "s" }, ...(hasTokens ? [{ label: "tokens", stroke: "#8250df", width: 2, scale: "tok", paths: stepped() }] : []),
      { label: D.cost_timed_label, stroke: "#bf8700", width: 2, scale: "sec", paths: stepped() },
      { label: "worker s (all stages)", stroke: "#bf8700", width: 1, dash: [4, 4], scale: "sec", paths: stepped() }];
    const data = [pts.map((p) => p.t), ...(hasTokens ? [pts.map((p) => p.tokens)] : []), pts.map((p) => p.timed_s), pts.map((p) => p.eval_s)];
    const axes = [{ label: "seconds since the run started" }, ...(hasTokens ? [{ scale: "tok", label: "tokens", size: 70 }] : []), { scale: "sec", side: hasTokens ? 1 : 3, label: "seconds", grid: { show: !hasTokens } }];
    if (hasUsd) {
      series.push({ label: "dollars", stroke: "#cf222e", width: 2, scale: "usd", paths: stepped() });
      data.push(pts.map((p) => p.usd));
      axes.push({ scale: "usd", side: 1, label: "$", grid: { show: false } });
    }
    new uPlot({ width: width(cost), height: 220, scales: { x: padded, tok: {}, sec: {}, usd: {} }, axes, series }, data, cost);
  }

  function roofline() {
    const box = document.getElementById("roofline");
    if (!box) return;
    const notes = document.getElementById("roofline-notes");
    const correct = D.candidates.filter((c) => c.correct);
    const placed = correct.filter((c) => c.roofline && c.roofline.arithmetic_intensity > 0 && c.roofline.achieved_flops_per_s > 0);
    const unplaced = correct.filter((c) => !placed.includes(c));
    const P = D.peaks;
    if (!P) {
      hide(box, `No roofline: ${D.peaks_note || "the run's device has no roofline"}.`);
    } else {
      const bw = P.dram_bytes_per_s, fp32 = P.fp32_flops_per_s, tensor = P.bf16_tensor_flops_per_s || P.tf32_tensor_flops_per_s;
      const xs = new Set();
      for (let e = -2; e <= 4; e += 0.1) xs.add(Number((10 ** e).toPrecision(6)));
      xs.add(fp32 / bw);
      if (tensor) xs.add(tensor / bw);
      for (const c of placed) xs.add(c.roofline.arithmetic_intensity);
      const x = [...xs].sort((a, b) => a - b);
      const data = [x, x.map((v) => Math.min(v * bw, fp32) / 1e12)];
      const series = [{ label: "FLOP/byte" }, { label: `fp32 roof (${P.source})`, stroke: "#24292f", width: 2, points: { show: false } }];
      if (tensor) { data.push(x.map((v) => Math.min(v * bw, tensor) / 1e12)); series.push({ label: "tensor roof", stroke: "#8c959f", width: 1.5, dash: [6, 4], points: { show: false } }); }
      const at = new Map(placed.map((c) => [c.roofline.arithmetic_intensity, c]));
      data.push(x.map((v) => (at.has(v) ? at.get(v).roofline.achieved_flops_per_s / 1e12 : null)));
      series.push({ label: "candidates", stroke: "#0969da", fill: "#0969da", ...dots });
      new uPlot({ width: width(box), height: 320, scales: { x: { time: false, distr: 3 }, y: { distr: 3 } },
        axes: [{ label: "arithmetic intensity (FLOP per DRAM byte)" }, { label: "TFLOP/s" }], series }, data, box);
      notes.append(h("li", { text: `${P.name}: ${(bw / 1e12).toFixed(2)} TB/s DRAM, ${(fp32 / 1e12).toFixed(1)} TFLOP/s fp32${tensor ? `, ${(tensor / 1e12).toFixed(0)} TFLOP/s tensor` : ""} (${P.source})` }));
      for (const c of placed) notes.append(h("li", { text: `${c.id}: ${c.roofline.bound} bound, ${num(c.roofline.pct_of_roof, 0)}% of the roof, ${slowdown(c.speedup)}` }));
    }
    if (unplaced.length) {
      const profiledOnly = unplaced.filter((c) => c.profiled);
      const never = unplaced.filter((c) => !c.profiled);
      if (profiledOnly.length) notes.append(h("li", { text: `profiled, placement not recorded: ${profiledOnly.map((c) => `${c.id}${c.pct_of_roof !== null ? ` (${c.pct_of_roof.toFixed(0)}% of roof)` : ""}`).join(", ")}` }));
      if (never.length) notes.append(h("li", { text: `not profiled: ${never.map((c) => c.id).join(", ")}` }));
    }
    if (!correct.length) notes.append(h("li", { text: "no correct candidate to place" }));
  }

  // -------------------------------------------------------------------------------------------- table
  function table() {
    const box = document.getElementById("table");
    if (!box) return;
    const rows = D.candidates.map((c) => {
      const tr = h("tr", { "data-id": c.id, onclick: () => { select(c.id); document.getElementById("tree-section").scrollIntoView(); } },
        h("td", { text: c.id + (c.best ? " ★" : "") }), h("td", { text: c.parent || "reference" }), h("td", { text: c.origin }),
        h("td", { class: "num", text: String(c.round) }), h("td", {}, badge(c.state)),
        h("td", { class: "num", text: c.correct ? slowdown(c.speedup) : "" }), h("td", { class: "muted", text: c.timing ? fci(c.timing.ci95) : "" }),
        h("td", { class: "num", text: c.timing ? fms(c.timing.reference_ms) : "" }), h("td", { class: "num", text: c.timing ? fms(c.timing.candidate_ms) : "" }),
        h("td", { text: c.correct ? c.summary : `${c.failed_check ? c.failed_check + ": " : ""}${c.reason || c.summary}`.slice(0, 160) }));
      return tr;
    });
    box.append(h("p", { class: "hint", text: "Speedup, CI and times are the search's: each candidate was timed "
      + "interleaved with its own run of the reference, so the reference's time differs from row to row with the load "
      + "and the inputs of that moment; compare the two times within a row. The answer's figure is the final re-timing "
      + (D.final ? `(${slowdown(D.final.speedup)} for ${D.final.candidate}).` : "(none: nothing was re-timed).") }),
    h("table", { class: "cands" },
      h("thead", {}, h("tr", {}, ["id", "parent", "origin", "round", "verdict", "speedup (search)", "95% CI", "reference", "candidate", "summary / why"].map((t) => h("th", { text: t })))),
      h("tbody", {}, rows)));
  }

  // --------------------------------------------------------------------------------------- model-wide
  function runLink(runId) {
    if (location.protocol === "http:" || location.protocol === "https:") return `/report/${encodeURIComponent(runId)}${location.search}`;
    return `${encodeURIComponent(runId)}.html`;
  }

  function modelWide() {
    const box = document.getElementById("model-wide-body");
    const M = D.model_wide;
    if (!box || !M) return;
    box.append(h("p", {}, h("b", { text: M.model || "model" }), ` · entry ${M.entry} · ${M.device}${M.timer ? ` (${M.timer} time)` : ""} · ` +
      `${M.model_ms.toFixed(3)} ms per forward attributed${M.eager_ms !== null ? `, ${M.eager_ms.toFixed(3)} ms without the profiler` : ""} · ${M.iterations} profiled forwards · ${M.stamp}`));
    box.append(h("h4", { text: "Hot spots (module classes)" }));
    box.append(h("table", { class: "hot" },
      h("thead", {}, h("tr", {}, ["class", "defined at", "instances", "calls", "total ms", "% of model", "self %"].map((t) => h("th", { text: t })))),
      h("tbody", {}, M.hot_classes.map((k) => h("tr", {}, h("td", { text: k.name + (k.library ? " (torch.nn)" : "") }),
        h("td", { text: k.file ? `${k.file}:${k.line || ""}` : "" }), h("td", { class: "num", text: String(k.instances) }), h("td", { class: "num", text: String(k.calls) }),
        h("td", { class: "num", text: num(k.total_ms, 3) }), h("td", { class: "num", text: num(k.total_pct, 1) }), h("td", { class: "num", text: num(k.self_pct, 1) }))))));
    box.append(h("h4", { text: "Modules optimized" }));
    box.append(h("table", { class: "modules" },
      h("thead", {}, h("tr", {}, ["module", "% of model", "run", "module speedup", "outcome", "why"].map((t) => h("th", { text: t })))),
      h("tbody", {}, M.modules.map((m) => h("tr", {}, h("td", { text: m.name }), h("td", { class: "num", text: num(m.total_pct, 1) }),
        h("td", {}, m.run_id ? (m.run_id === D.run_id ? h("b", { text: `${m.run_id} (this run)` }) : h("a", { href: runLink(m.run_id), text: m.run_id })) : "–",
          m.run_status ? h("div", { class: "muted", text: `${m.run_status} · ${m.run_candidates} candidates${m.run_best ? ` · best ${slowdown(m.run_best)} (search)` : ""}` }) : null),
        h("td", { class: "num", text: slowdown(m.speedup) }), h("td", {}, h("span", { class: `state st-${m.status === "kept" ? "correct" : "cancelled"}`, text: m.status })),
        h("td", { text: m.reason }))))));
    box.append(h("h4", { id: "end-to-end", text: "End to end" }));
    const C = M.check;
    if (!C) box.append(h("p", { class: "muted", text: "No end-to-end check: no module had a faster verified candidate." }));
    else {
      const ok = (C.outputs || []).every((o) => o.ok);
      box.append(h("p", {}, h("span", { class: ok ? "ok" : "bad", text: ok ? "outputs match" : "outputs DIFFER" }),
        ` · ${num(C.before_ms, 3)} ms → ${num(C.after_ms, 3)} ms per forward`,
        C.speedup !== null && C.speedup !== undefined ? ` · ${slowdown(C.speedup)} ${C.ci ? `(99% CI ${fci(C.ci)}, ${C.reps} forwards each way)` : ""}` : ""));
      const outcome = C.outcome || (((C.kept || []).length || C.model_mode) ? "kept" : "nothing_kept");
      if (C.speedup !== null && C.speedup !== undefined && C.speedup < 1) box.append(h("p", { class: "bad flag", text: `slower than the original end to end: ${slowdown(C.speedup)}` }));
      if (C.cpu && C.cpu.fitted !== null && C.cpu.fitted !== undefined) box.append(h("p", { class: "muted", text: `timed on a busy CPU: ${C.cpu.threads} threads got ${num(C.cpu.cores, 1)} cores, so the check used ${C.cpu.fitted}` }));
      box.append(h("p", { class: "outcome" }, h("span", { class: `state st-${outcome === "kept" ? "correct" : "cancelled"}`, text: outcome.replace("_", " ") }),
        C.decision && C.decision.says ? ` · replacements: ${C.decision.says}` : ""));
      if ((C.outputs || []).length) box.append(h("table", {}, h("thead", {}, h("tr", {}, ["output", "", "dtype", "shape", "max abs error", "atol", "rtol"].map((t) => h("th", { text: t })))),
        h("tbody", {}, C.outputs.map((o, i) => h("tr", {}, h("td", { text: o.path || String(i) }), h("td", { class: o.ok ? "ok" : "bad", text: o.ok ? "✓" : "✗" }),
          h("td", { text: o.dtype || "" }), h("td", { text: o.shape ? `[${o.shape.join(", ")}]` : "" }), h("td", { class: "num", text: o.max_abs !== undefined && o.max_abs !== null ? Number(o.max_abs).toPrecision(3) : "" }),
          h("td", { class: "num", text: o.atol ?? "" }), h("td", { class: "num", text: o.rtol ?? "" }))))));
      if ((C.kept || []).length) box.append(h("p", { text: `kept: ${C.kept.join(", ")}` }));
      for (const r of C.reverted || []) box.append(h("p", { class: "bad", text: `reverted ${r.cls}: ${r.why}` }));
      if ((C.model_modes || []).length) {
        const marked = C.model_modes.some((m) => "chosen" in m);  // results before rows said so: by name
        box.append(h("h4", { text: "Whole forward compiled on top" }));
        box.append(h("p", { class: "muted", text: `the replacements alone: ${C.modules_speedup ? slowdown(C.modules_speedup) : "none kept"}; ` +
          "each mode checked end to end and timed against an untouched copy of the model, in rounds until its 99% interval decides; chosen only when above 1" }));
        box.append(h("table", { class: "modes" },
          h("thead", {}, h("tr", {}, ["torch.compile mode", "outputs", "compile s", "ms per forward", "speedup", "99% CI", "decision", ""].map((t) => h("th", { text: t })))),
          h("tbody", {}, C.model_modes.map((m) => h("tr", {}, h("td", { text: m.replacements === false ? `${m.mode} (without the replacements)` : m.mode }),
            h("td", { class: m.ok ? "ok" : "bad", text: m.ok ? "match" : (m.why || "failed") }),
            h("td", { class: "num", text: m.compile_s !== undefined && m.compile_s !== null ? String(m.compile_s) : "" }),
            h("td", { class: "num", text: m.after_ms ? `${num(m.before_ms, 2)} → ${num(m.after_ms, 2)}` : "" }),
            h("td", { class: "num", text: m.speedup ? slowdown(m.speedup) : "–" }),
            h("td", { class: "num", text: m.ci ? fci(m.ci) : "" }),
            h("td", { text: m.decision || "" }),
            h("td", { text: (marked ? m.chosen : m.mode === C.model_mode) ? "chosen" : "" }))))));
        // what a row's figures alone do not say: the blocks left eager, a head-to-head race between two faster ones
        for (const m of C.model_modes.filter((row) => row.note)) box.append(h("p", { class: "muted", text: `${m.mode}: ${m.note}` }));
      }
    }
    for (const m of M.modules) {
      if ((m.carried || []).length) box.append(h("p", { text: `${m.name}: carried over to ${m.carried.length} more instance(s), each checked in the forward` }));
      for (const t of m.not_carried || []) box.append(h("p", { class: "muted", text: `${m.name}: ${t}` }));
    }
    for (const n of M.notes) box.append(h("p", { class: "muted", text: n }));
    if (M.patch_file) box.append(h("p", {}, "Patch: ", h("code", { text: M.patch_file }), " (import it and call apply(model))"));
  }

  // --------------------------------------------------------------------------------------------- main
  function main() {
    byId = new Map(D.candidates.map((c) => [c.id, c]));
    summary();
    tree();
    table();
    modelWide();
    charts();
    roofline();
    if (document.getElementById("candidate")) {
      const hash = decodeURIComponent(location.hash.slice(1));
      const first = byId.has(hash) ? hash : D.best || (D.candidates.length ? D.candidates[D.candidates.length - 1].id : "@ref");
      select(first);
    }
    window.forgeReport = { data: D, select, selected: () => selected };
    document.body.dataset.ready = "true";
  }

  load().then((data) => { D = data; main(); }).catch((err) => {
    document.body.dataset.ready = "error";
    document.querySelector("main").prepend(h("p", { class: "error", text: `This report could not be read: ${err}` }));
    throw err;
  });
})();
