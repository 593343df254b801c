// Waiting for conditions (never for fixed times): poll until a check gives a value, or fail with a
// message that says what was awaited and what was last seen.

export class WaitTimeout extends Error {}

export interface UntilOptions {
  timeoutMs: number;
  /** Poll interval; the UI updates in tens of milliseconds, the server's jobs in seconds. */
  intervalMs?: number;
  /** Describes the last observed state, appended to the timeout message. */
  lastSeen?: () => string | Promise<string>;
}

/**
 * Poll `check` until it returns a truthy value (returned) or the time is up (throws WaitTimeout
 * "timed out after N s waiting for <what>"). Exceptions in `check` count as "not yet" (the UI is
 * mid-update) and the last one is reported on timeout.
 */
export async function until<T>(what: string, check: () => T | Promise<T>, opts: UntilOptions): Promise<NonNullable<T>> {
  const deadline = Date.now() + opts.timeoutMs;
  const interval = opts.intervalMs ?? 200;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v as NonNullable<T>;
      lastError = undefined;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() >= deadline) break;
    await delay(Math.min(interval, Math.max(0, deadline - Date.now())));
  }
  let seen = "";
  if (opts.lastSeen) {
    try {
      seen = `\n  last seen: ${await opts.lastSeen()}`;
    } catch (err) {
      seen = `\n  last seen: (could not read: ${String(err)})`;
    }
  }
  const why = lastError ? `\n  last error: ${lastError instanceof Error ? lastError.message.split("\n")[0] : String(lastError)}` : "";
  throw new WaitTimeout(`timed out after ${(opts.timeoutMs / 1000).toFixed(0)} s waiting for ${what}${why}${seen}`);
}

/**
 * A plain delay. Only for the scenario's deliberate "time passes" checks (e.g. autosave had its
 * chance to write): everything else waits for a condition with `until`.
 */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
