// The server's stderr, line by line, into the log output channel at each line's own level. Pure: no
// `vscode` import.
//
// vscode-languageclient logs every stderr line as an error by default. forge-lsp writes its log
// records as `<date> <time>,<ms> LEVEL logger: message` (forge_lsp/server/__main__.py); a line that
// does not start a record (a traceback's frames, a wrapped message) belongs to the record above
// it. Anything before the first record (Python failing to start, an argument error) is an error.

export type Level = "trace" | "debug" | "info" | "warn" | "error";

const RECORD = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) (.*)$/;
const LEVELS: Record<string, Level> = { DEBUG: "debug", INFO: "info", WARNING: "warn", ERROR: "error", CRITICAL: "error" };

export interface LogLine {
  level: Level;
  /** The line without the server's own timestamp and level (the output channel adds its own). */
  text: string;
}

/** Classifies lines; keeps the level of the last record for the lines that continue it. */
export class ServerLogParser {
  private current: Level = "error";

  line(raw: string): LogLine {
    const m = RECORD.exec(raw);
    if (m) {
      this.current = LEVELS[m[1]];
      return { level: this.current, text: m[2] };
    }
    return { level: this.current, text: raw };
  }
}
