// A small step library for VS Code's workbench DOM (VS Code 1.139 in code-server), used through
// Playwright. Each helper waits for what the user would wait for, and its selectors are commented
// with what they match. Selectors that VS Code may change between versions are all in SEL.

import type { Frame, FrameLocator, Locator, Page } from "playwright-core";
import { until } from "./wait";

/** Workbench selectors (VS Code's own class names; stable for years, but all in one place). */
export const SEL = {
  workbench: ".monaco-workbench",
  quickInput: ".quick-input-widget",
  quickInputBox: ".quick-input-widget .quick-input-box input",
  quickInputRow: ".quick-input-widget .quick-input-list .monaco-list-row",
  /** The editor of the active editor group (a text editor, or the modified side of a diff editor). */
  activeGroup: ".part.editor .editor-group-container.active",
  /** Code lenses: a content widget per line, one <a> per lens with a command (separators are <span>s). */
  codeLensWidget: ".monaco-editor .contentWidgets .codelens-decoration",
  notificationToasts: ".notifications-toasts",
  notificationCenter: ".notifications-center",
  notificationItem: ".notification-list-item",
  notificationMessage: ".notification-list-item-message",
  /** Buttons of a notification (primary actions, and Cancel of a cancellable progress notification). */
  notificationButton: ".notification-list-item-buttons-container .monaco-button",
  statusBar: "#workbench\\.parts\\.statusbar",
  sideBar: ".part.sidebar",
  activityBarItem: ".part.activitybar .action-item .action-label",
  hover: ".monaco-hover:not(.hidden)",
  tab: ".part.editor .tabs-container .tab",
  diffEditor: ".part.editor .monaco-diff-editor",
  /** The code-action menu (Ctrl+.): the "action widget" list. */
  actionWidgetRow: ".action-widget .monaco-list-row",
  /** A webview panel's outer iframe (VS Code's host page for it) once its content is loaded. */
  webviewOuter: "iframe.webview.ready",
  webviewInner: "iframe#active-frame",
};

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** A string matches exactly (after trimming); a RegExp as given. */
function exact(text: string | RegExp): RegExp {
  return typeof text === "string" ? new RegExp(`^\\s*${escapeRe(text)}\\s*$`) : text;
}

export interface Notification {
  message: string;
  buttons: string[];
  /** True while its progress bar runs (a withProgress notification). */
  progress: boolean;
  /** "toast" (popped up) or "center" (the notification center list). */
  in: "toast" | "center";
}

export interface EditorLine {
  line: number;
  text: string;
}

export interface ReviewDecorations {
  /** Lines with the removed-line background (diffEditor.removedLineBackground). */
  red: EditorLine[];
  /** Lines with the inserted-line background (diffEditor.insertedLineBackground). */
  green: EditorLine[];
  /** Lines with text drawn struck through (text-decoration: line-through). */
  struck: EditorLine[];
}

export interface TreeRow {
  label: string;
  description: string;
  ariaLabel: string;
  /** 1 = top level (the Runs view's groups), 2 = a run, 3 = a run's details. */
  level: number;
}

export interface SeenNotification {
  /** When it was first seen (ms since the epoch, the page's clock: this machine's). */
  t: number;
  message: string;
  buttons: string[];
}

/**
 * Runs in the workbench page (not in webview frames): records every notification the moment it is
 * rendered, as a toast or in the center. Toasts hide after ~15 s, and a progress notification may
 * live only a few seconds: a test that looks later still knows what the user was shown.
 */
function notificationRecorder(): void {
  if (window.top !== window) return;
  const seen: SeenNotification[] = [];
  const keys = new Set<string>();
  (window as unknown as { __e2eNotifications: SeenNotification[] }).__e2eNotifications = seen;
  setInterval(() => {
    for (const item of Array.from(document.querySelectorAll(".notification-list-item"))) {
      const message = (item.querySelector(".notification-list-item-message")?.textContent ?? "").trim();
      const buttons = Array.from(item.querySelectorAll(".notification-list-item-buttons-container .monaco-button"))
        .map((b) => (b.textContent ?? "").trim());
      const key = `${message}\u0000${buttons.join("\u0001")}`;
      if (message && !keys.has(key)) {
        keys.add(key);
        seen.push({ t: Date.now(), message, buttons });
      }
    }
  }, 100);
}

export class Workbench {
  constructor(readonly page: Page) {}

  /** Call before the page loads the workbench (an init script). */
  static async install(page: Page): Promise<void> {
    await page.addInitScript(notificationRecorder);
  }

  /** Every notification shown since `sinceMs` (see notificationRecorder). */
  async seenNotifications(sinceMs = 0): Promise<SeenNotification[]> {
    const all = await this.page.evaluate(() => (window as unknown as { __e2eNotifications?: SeenNotification[] }).__e2eNotifications ?? []);
    return all.filter((n) => n.t >= sinceMs);
  }

  // ------------------------------------------------------------------ startup
  /** The workbench is up and the editor area exists (the extension host may still be starting). */
  async waitReady(timeoutMs = 90_000): Promise<void> {
    await this.page.locator(SEL.workbench).waitFor({ state: "visible", timeout: timeoutMs });
    await this.page.locator(SEL.statusBar).waitFor({ state: "visible", timeout: timeoutMs });
  }

  // ------------------------------------------------------------------ quick input
  private async quickInputOpen(key: string, prefixCheck?: (v: string) => boolean): Promise<void> {
    // The quick input may still be closing from a previous use: wait for it to be gone first.
    await this.page.locator(SEL.quickInput).waitFor({ state: "hidden", timeout: 5000 }).catch(() => undefined);
    await this.page.keyboard.press(key);
    await this.page.locator(SEL.quickInputBox).waitFor({ state: "visible", timeout: 10_000 });
    if (prefixCheck) {
      await until(`the quick input opened by ${key}`, async () => prefixCheck(await this.page.locator(SEL.quickInputBox).inputValue()),
        { timeoutMs: 5000, intervalMs: 50 });
    }
  }

  /** Pick the quick-input row whose label matches (waits for the list to be filtered to it). */
  private async pickRow(label: string | RegExp, what: string, timeoutMs = 20_000): Promise<void> {
    const re = typeof label === "string" ? new RegExp(escapeRe(label)) : label;
    // Rows appear asynchronously (file search, command list); Enter before they do would pick nothing. The list
    // is re-rendered under the pointer (more search results, the history's rows): the labels are read in one
    // evaluation (a per-row read of a row that just went away waits for Playwright's 30 s default), and the row
    // is clicked by its exact label, so a re-rendered list gives the same row or a retry, never another row.
    for (let attempt = 1; ; attempt++) {
      const found = await until(`a quick-input row ${re} (${what})`, async () =>
        (await this.quickInputRows()).find((l) => re.test(l)),
      { timeoutMs, intervalMs: 100, lastSeen: () => this.quickInputRows().then((r) => JSON.stringify(r)) });
      const quoted = found.replace(/\\/g, "\\\\").replace(/"/g, '\\"');
      const byLabel = this.page.locator(`${SEL.quickInputRow}[aria-label="${quoted}"]`);
      // a row without an aria-label was found by its text
      const row = (await byLabel.count()) ? byLabel.first() : this.page.locator(SEL.quickInputRow).filter({ hasText: found }).first();
      try {
        await row.click({ timeout: 5000 });
        break;
      } catch (e) {
        if (attempt >= 4) throw e;
      }
    }
    await this.page.locator(SEL.quickInput).waitFor({ state: "hidden", timeout: 10_000 });
  }

  async quickInputRows(): Promise<string[]> {
    return this.page.locator(SEL.quickInputRow).evaluateAll((els) => els.map((e) => e.getAttribute("aria-label") ?? e.textContent ?? ""));
  }

  /** Quick Open (Ctrl+P) a workspace file by name; waits until it is the active tab with its text shown. */
  async openFile(name: string): Promise<void> {
    await this.quickInputOpen("Control+P");
    await this.page.keyboard.type(name);
    // file search can take longer than a command's row right after a hot-spot run (k-model-wide-accept-undo)
    await this.pickRow(new RegExp(`^${escapeRe(name)}\\b`), `Quick Open ${name}`, 45_000);
    await until(`${name} to be the active editor tab`, async () => (await this.activeTabLabel()) === name,
      { timeoutMs: 15_000, lastSeen: () => this.tabs().then((t) => t.join(", ")) });
    await this.activeEditor().locator(".view-lines .view-line").first().waitFor({ timeout: 15_000 });
  }

  /** Run a command by its palette title (e.g. "Forge: Restart Server") through F1. */
  async runCommand(title: string): Promise<void> {
    await this.quickInputOpen("F1", (v) => v.startsWith(">"));
    await this.page.keyboard.type(title);
    await this.pickRow(new RegExp(`^${escapeRe(title)}(,|$|\\s)`), `command ${title}`);
  }

  /** Go to a 1-based line with Ctrl+G (the cursor lands at its first character). */
  async gotoLine(line: number): Promise<void> {
    await this.activeEditor().locator(".view-lines").click({ position: { x: 5, y: 5 } });
    await this.quickInputOpen("Control+G");
    await this.page.keyboard.type(String(line));
    await this.page.keyboard.press("Enter");
    await this.page.locator(SEL.quickInput).waitFor({ state: "hidden", timeout: 5000 });
    await until(`the cursor on line ${line}`, async () => (await this.statusBarText()).includes(`Ln ${line},`),
      { timeoutMs: 5000, lastSeen: () => this.statusBarText() });
  }

  // ------------------------------------------------------------------ editor
  /** The active group's code editor (for a diff editor: its modified side). */
  activeEditor(): Locator {
    return this.page.locator(`${SEL.activeGroup} .monaco-editor:not(.original-in-monaco-diff-editor)`).last();
  }

  /** The active editor's rendered lines (only those in the viewport!), top to bottom, with line numbers. */
  async visibleLines(): Promise<EditorLine[]> {
    return this.activeEditor().evaluate((ed) => {
      const top = (el: Element) => parseFloat((el as HTMLElement).style.top || "0");
      // line numbers live in the margin, in rows positioned at the same `top` as the text rows
      const numbers = new Map<number, number>();
      for (const n of Array.from(ed.querySelectorAll(".margin-view-overlays > div"))) {
        const num = parseInt(n.querySelector(".line-numbers")?.textContent ?? "", 10);
        if (Number.isFinite(num)) numbers.set(Math.round(top(n)), num);
      }
      return Array.from(ed.querySelectorAll(".view-lines > .view-line"))
        .map((l) => ({ line: numbers.get(Math.round(top(l))) ?? -1, text: (l.textContent ?? "").replace(/\u00a0/g, " ") }))
        .sort((a, b) => a.line - b.line);
    });
  }

  /** The rendered line containing `text` (first match), or undefined. */
  async findLine(text: string): Promise<EditorLine | undefined> {
    return (await this.visibleLines()).find((l) => l.text.includes(text));
  }

  async save(): Promise<void> {
    await this.activeEditor().locator(".view-lines").click({ position: { x: 5, y: 5 } });
    await this.page.keyboard.press("Control+S");
  }

  /**
   * Lines carrying the inline review's decorations, found by their computed style: the background
   * colours of the theme's diff colours (what the user sees as red/green), and struck-through text.
   */
  async reviewDecorations(): Promise<ReviewDecorations> {
    return this.activeEditor().evaluate((ed) => {
      const probe = (cssVar: string) => {
        // resolve the theme colour the same way the decoration's CSS rule does
        const d = document.createElement("div");
        d.style.background = `var(${cssVar})`;
        ed.appendChild(d);
        const c = getComputedStyle(d).backgroundColor;
        d.remove();
        return c;
      };
      const red = probe("--vscode-diffEditor-removedLineBackground");
      const green = probe("--vscode-diffEditor-insertedLineBackground");
      const top = (el: Element) => Math.round(parseFloat((el as HTMLElement).style.top || "0"));
      const numbers = new Map<number, number>();
      for (const n of Array.from(ed.querySelectorAll(".margin-view-overlays > div"))) {
        const num = parseInt(n.querySelector(".line-numbers")?.textContent ?? "", 10);
        if (Number.isFinite(num)) numbers.set(top(n), num);
      }
      const texts = new Map<number, string>();
      for (const l of Array.from(ed.querySelectorAll(".view-lines > .view-line"))) texts.set(top(l), (l.textContent ?? "").replace(/\u00a0/g, " "));
      const line = (t: number) => ({ line: numbers.get(t) ?? -1, text: texts.get(t) ?? "" });
      const out = { red: [] as { line: number; text: string }[], green: [] as { line: number; text: string }[], struck: [] as { line: number; text: string }[] };
      // whole-line decorations: one child per decoration inside the line's overlay row
      for (const row of Array.from(ed.querySelectorAll(".view-overlays > div"))) {
        const bgs = Array.from(row.children).map((c) => getComputedStyle(c).backgroundColor);
        if (bgs.includes(red)) out.red.push(line(top(row)));
        if (bgs.includes(green)) out.green.push(line(top(row)));
      }
      for (const l of Array.from(ed.querySelectorAll(".view-lines > .view-line"))) {
        const spans = Array.from(l.querySelectorAll("span span"));
        if (spans.some((s) => getComputedStyle(s).textDecorationLine.includes("line-through"))) out.struck.push(line(top(l)));
      }
      return out;
    });
  }

  /** Squiggles (diagnostic decorations) drawn on the rendered line with this text: their severities. */
  async squigglesOnLine(text: string): Promise<string[]> {
    return this.activeEditor().evaluate((ed, lineText) => {
      const top = (el: Element) => Math.round(parseFloat((el as HTMLElement).style.top || "0"));
      const target = Array.from(ed.querySelectorAll(".view-lines > .view-line")).find((l) => (l.textContent ?? "").replace(/\u00a0/g, " ").includes(lineText));
      if (!target) return ["(line not rendered)"];
      const t = top(target);
      const out: string[] = [];
      for (const row of Array.from(ed.querySelectorAll(".view-overlays > div"))) {
        if (top(row) !== t) continue;
        for (const c of Array.from(row.querySelectorAll("[class*='squiggly-']"))) {
          const m = /squiggly-(\w+)/.exec(c.className);
          if (m) out.push(m[1]);
        }
      }
      return out;
    }, text);
  }

  // ------------------------------------------------------------------ code lenses
  /** Every code lens shown in the active editor: its text and the editor line it sits above. */
  async codeLenses(): Promise<Array<{ text: string; aboveLine: string }>> {
    const lines = await this.activeEditor().evaluate((ed) => {
      const rows = Array.from(ed.querySelectorAll(".view-lines > .view-line")).map((l) => ({
        y: l.getBoundingClientRect().top,
        text: (l.textContent ?? "").replace(/\u00a0/g, " "),
      }));
      return Array.from(ed.querySelectorAll(".contentWidgets .codelens-decoration")).flatMap((w) => {
        const bottom = w.getBoundingClientRect().bottom;
        // the lens widget sits in a view zone right above its line: the first line below it
        const below = rows.filter((r) => r.y >= bottom - 2).sort((a, b) => a.y - b.y)[0];
        return Array.from(w.children)
          .filter((c) => c.tagName === "A" || (c.tagName === "SPAN" && !/^\s*\|\s*$/.test((c.textContent ?? "").replace(/\u00a0/g, " "))))
          .map((c) => ({ text: (c.textContent ?? "").replace(/\u00a0/g, " ").trim(), aboveLine: below?.text ?? "" }));
      });
    });
    return lines.filter((l) => l.text);
  }

  /** A clickable code lens by its text (exact when a string). */
  codeLens(text: string | RegExp): Locator {
    return this.activeEditor().locator(`.contentWidgets .codelens-decoration a`).filter({ hasText: exact(text) });
  }

  async waitForCodeLens(text: string | RegExp, timeoutMs: number): Promise<Locator> {
    const lens = this.codeLens(text);
    await until(`the code lens "${text}"`, async () => (await lens.count()) > 0,
      { timeoutMs, intervalMs: 250, lastSeen: () => this.codeLenses().then((l) => JSON.stringify(l.map((x) => x.text))) });
    return lens.first();
  }

  async clickCodeLens(text: string | RegExp, timeoutMs = 30_000): Promise<void> {
    const lens = await this.waitForCodeLens(text, timeoutMs);
    await lens.click();
  }

  // ------------------------------------------------------------------ code actions
  /** Ctrl+. on the current cursor position: the titles of the code-action menu (closed again with Escape). */
  async codeActionTitles(line: number): Promise<string[]> {
    const rows = this.page.locator(SEL.actionWidgetRow);
    await until("the code-action menu (Ctrl+.)", async () => {
      // a fresh window can drop the key (focus still moving back from the quick input) or answer it
      // before the language server is ready: put the cursor back on the line and ask again
      await this.gotoLine(line);
      await this.page.keyboard.press("Control+.");
      return rows.first().waitFor({ state: "visible", timeout: 5000 }).then(() => true, () => false);
    }, { timeoutMs: 30_000, intervalMs: 100 });
    // the menu fills in as providers answer: read it once its length is stable
    let last = -1;
    await until("the code-action menu to settle", async () => {
      const n = await rows.count();
      const stable = n === last;
      last = n;
      return stable;
    }, { timeoutMs: 10_000, intervalMs: 300 });
    const titles = await rows.evaluateAll((els) => els.map((e) => (e.getAttribute("aria-label") ?? e.textContent ?? "").trim()));
    return titles;
  }

  async closeMenus(): Promise<void> {
    await this.page.keyboard.press("Escape");
  }

  // ------------------------------------------------------------------ notifications
  /** The notifications on screen (toasts) and, with `center`, those in the notification center. */
  async notifications(center = false): Promise<Notification[]> {
    const read = async (container: string, where: "toast" | "center"): Promise<Notification[]> =>
      this.page.locator(`${container} ${SEL.notificationItem}`).evaluateAll((items, w) => items
        .filter((i) => (i as HTMLElement).offsetParent !== null)
        .map((i) => ({
          message: (i.querySelector(".notification-list-item-message")?.textContent ?? "").trim(),
          buttons: Array.from(i.querySelectorAll(".notification-list-item-buttons-container .monaco-button"))
            .map((b) => (b.textContent ?? "").trim()),
          // a running progress bar: the progress container is shown and its bit animates
          progress: !!i.querySelector(".monaco-progress-container.active, .monaco-progress-container.infinite, .monaco-progress-container.discrete:not(.done)"),
          in: w as "toast" | "center",
        })), where);
    const toasts = await read(SEL.notificationToasts, "toast");
    return center ? [...toasts, ...(await read(SEL.notificationCenter, "center"))] : toasts;
  }

  /**
   * Wait for a notification whose message matches (and `pred`): on screen now, or shown at some
   * moment since `sinceMs` (when given) even if it is gone again.
   */
  async waitForNotification(message: RegExp, timeoutMs: number, pred: (n: Notification | SeenNotification) => boolean = () => true,
    sinceMs?: number): Promise<Notification | SeenNotification> {
    return until(`a notification ${message}`, async () => {
      const live = (await this.notifications()).find((n) => message.test(n.message) && pred(n));
      if (live || sinceMs === undefined) return live;
      return (await this.seenNotifications(sinceMs)).find((n) => message.test(n.message) && pred(n));
    }, {
      timeoutMs, intervalMs: 200,
      lastSeen: async () => `on screen ${JSON.stringify(await this.notifications())}` +
        (sinceMs === undefined ? "" : `; shown since: ${JSON.stringify((await this.seenNotifications(sinceMs)).map((n) => n.message))}`),
    });
  }

  /**
   * Click a button of the notification whose message matches: on its toast, or (a toast hides after
   * ~15 s when the window has focus) in the notification center, opened for it.
   */
  async clickNotificationButton(message: RegExp, button: string): Promise<void> {
    const item = (container: string) => this.page.locator(`${container} ${SEL.notificationItem}`)
      .filter({ has: this.page.locator(SEL.notificationMessage, { hasText: message }) }).first();
    const toast = item(SEL.notificationToasts);
    if (!(await toast.isVisible())) {
      await this.runCommand("Notifications: Show Notifications");
      await item(SEL.notificationCenter).waitFor({ state: "visible", timeout: 5000 });
      await item(SEL.notificationCenter).locator(SEL.notificationButton, { hasText: exact(button) }).first().click();
      return;
    }
    await toast.locator(SEL.notificationButton, { hasText: exact(button) }).first().click();
  }

  /** Close every toast (Escape-free: the "Clear All Notifications" command also empties the center). */
  async clearNotifications(): Promise<void> {
    await this.runCommand("Notifications: Clear All Notifications");
  }

  // ------------------------------------------------------------------ status bar
  async statusBarText(): Promise<string> {
    return (await this.page.locator(SEL.statusBar).innerText()).replace(/\s*\n\s*/g, " | ");
  }

  // ------------------------------------------------------------------ views
  /** Open a view container from the activity bar by its title (no-op when it is already shown). */
  async openActivity(title: string): Promise<void> {
    const shown = await this.page.locator(`${SEL.sideBar} .composite.title`).innerText().catch(() => "");
    if (shown.trim().toLowerCase().startsWith(title.toLowerCase())) return;
    // clicking an active container's icon would hide the side bar: only click when it is not shown
    await this.page.locator(`${SEL.activityBarItem}[aria-label^="${title}"]`).first().click();
    await until(`the ${title} container in the side bar`, async () =>
      (await this.page.locator(`${SEL.sideBar} .composite.title`).innerText()).trim().toLowerCase().startsWith(title.toLowerCase()),
    { timeoutMs: 10_000 });
  }

  /** The pane (view) of the side bar with this title. */
  pane(title: string): Locator {
    return this.page.locator(`${SEL.sideBar} .pane`).filter({ has: this.page.locator(".pane-header", { hasText: new RegExp(`^\\s*${escapeRe(title)}`, "i") }) }).first();
  }

  /** The rows of a tree view, top to bottom (only rendered ones: enough for a short list). */
  async treeRows(paneTitle: string): Promise<TreeRow[]> {
    return this.pane(paneTitle).locator(".monaco-list-row").evaluateAll((rows) => rows.map((r) => ({
      label: (r.querySelector(".label-name")?.textContent ?? "").trim(),
      description: (r.querySelector(".label-description")?.textContent ?? "").trim(),
      ariaLabel: r.getAttribute("aria-label") ?? "",
      level: parseInt(r.getAttribute("aria-level") ?? "0", 10),
    })));
  }

  treeRow(paneTitle: string, match: (row: TreeRow) => boolean): Promise<Locator> {
    return until(`a matching row in the ${paneTitle} view`, async () => {
      const rows = await this.treeRows(paneTitle);
      const i = rows.findIndex(match);
      return i >= 0 ? this.pane(paneTitle).locator(".monaco-list-row").nth(i) : undefined;
    }, { timeoutMs: 10_000, lastSeen: () => this.treeRows(paneTitle).then((r) => JSON.stringify(r)) });
  }

  // ------------------------------------------------------------------ tabs, diff editor, webviews
  /** Tab titles (their aria-label: the whole title; `.label-name` lacks the extension, in `.label-suffix`). */
  async tabs(): Promise<string[]> {
    return this.page.locator(SEL.tab).evaluateAll((tabs) => tabs.map((t) =>
      (t.getAttribute("aria-label") ?? t.querySelector(".monaco-icon-label-container")?.textContent ?? "").trim()));
  }

  /** The tab titles of each editor group, left to right (which group shows what). */
  async groupTabs(): Promise<string[][]> {
    return this.page.locator(".part.editor .editor-group-container").evaluateAll((groups) => groups.map((g) =>
      Array.from(g.querySelectorAll(".tabs-container .tab")).map((t) => (t.getAttribute("aria-label") ?? "").trim())));
  }

  async activeTabLabel(): Promise<string> {
    const tab = this.page.locator(`${SEL.activeGroup} .tabs-container .tab.active`).first();
    return ((await tab.getAttribute("aria-label", { timeout: 1000 }).catch(() => "")) ?? "").trim();
  }

  async diffEditorVisible(): Promise<boolean> {
    return this.page.locator(SEL.diffEditor).first().isVisible();
  }

  /** Click an editor-title action (the icons right of the tabs) of the active group by its label. */
  async clickEditorAction(label: string): Promise<void> {
    await this.page.locator(`${SEL.activeGroup} .editor-actions .action-label[aria-label^="${label}"]`).first().click();
  }

  /**
   * The content of a webview panel: VS Code hosts each webview in an outer iframe (its service
   * worker and message bridge) whose inner iframe #active-frame holds the extension's HTML.
   */
  webview(title?: string): FrameLocator {
    const outer = title ? `${SEL.webviewOuter}[title="${title}"]` : SEL.webviewOuter;
    return this.page.frameLocator(outer).last().frameLocator(SEL.webviewInner);
  }

  /**
   * The content frame of the webview whose page has `selector` (e.g. a page of its own kind among several
   * webviews): found among the page's frames, whatever the tab's title or the iframes' order.
   */
  async webviewFrameWith(selector: string, timeoutMs = 30_000): Promise<Frame> {
    return until(`a webview frame with ${selector}`, async () => {
      for (const f of this.page.frames()) {
        if (f === this.page.mainFrame()) continue;
        if (await f.locator(selector).count().catch(() => 0)) return f;
      }
      return undefined;
    }, { timeoutMs, lastSeen: () => this.tabs().then((x) => `tabs: ${x.join(", ")}`) });
  }

  // ------------------------------------------------------------------ hover
  /** Hover the mouse over the start of the rendered line containing `text`; returns the hover's text. */
  async hoverLine(text: string, timeoutMs = 10_000): Promise<string> {
    const line = this.activeEditor().locator(".view-lines > .view-line", { hasText: text }).first();
    await line.waitFor({ timeout: 10_000 });
    const box = await line.boundingBox();
    if (!box) throw new Error(`the line "${text}" has no box`);
    // over the first word ("class"): hovers need a character under the mouse, not the empty rest of the line
    await this.page.mouse.move(box.x + 30, box.y + box.height / 2, { steps: 2 });
    await this.page.mouse.move(box.x + 32, box.y + box.height / 2, { steps: 2 });
    const hover = this.page.locator(SEL.hover).filter({ hasText: /\S/ }).last();
    await hover.waitFor({ state: "visible", timeout: timeoutMs });
    // providers answer one after another: read once the text stops changing
    let last = "";
    return until("the hover text to settle", async () => {
      const t = (await hover.innerText()).trim();
      const stable = t === last && t.length > 0;
      last = t;
      return stable ? t : undefined;
    }, { timeoutMs: 5000, intervalMs: 300 });
  }

  async moveMouseAway(): Promise<void> {
    await this.page.mouse.move(2, 2);
  }
}
