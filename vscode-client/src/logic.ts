// The extension's own logic, free of the `vscode` module so plain Node can test it.

/** Server settings contributed as `delphi.<key>`, one-to-one with the server's initializationOptions. */
export const SERVER_SETTING_KEYS = [
  "indexDir", "chromaUrl", "embedder", "vectors", "maxFileBytes", "chunkChars", "extraIgnores",
  "reranker", "rerankerWindow", "rerankerWeight", "rrfK", "ltrKeepTop", "branchWeights", "pathCapPerDir", "traceFile",
  "embedBatch", "vectorSearch", "lexicalStore", "snapshot", "indexWorkers", "bm25Scoring", "bm25IdentifierWeight", "bm25IdentifierParts", "bm25Inflections", "prf", "warmStart", "implementationFirst", "cleanDescription",
] as const;

export type ServerSettingKey = (typeof SERVER_SETTING_KEYS)[number];

/** Reads a setting and says whether the user set it (anywhere) or it is the contributed default. */
export interface ConfigReader {
  get<T>(key: string): T | undefined;
  isSet(key: string): boolean;
}

/** initializationOptions: only what the user set, so the server's own sources (delphi.toml) still apply. */
export function initializationOptions(cfg: ConfigReader): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of SERVER_SETTING_KEYS) {
    if (!cfg.isSet(key)) continue;
    const value = cfg.get<unknown>(key);
    if (value === null || value === undefined) continue;
    out[key] = value;
  }
  return out;
}

/** How to start the server: an explicit command, or `python -m delphi_ls`. */
export function serverCommand(cfg: ConfigReader): { command: string; args: string[] } {
  const cmd = cfg.get<string[]>("server.command") ?? [];
  if (cmd.length > 0) return { command: cmd[0], args: cmd.slice(1) };
  return { command: cfg.get<string>("server.pythonPath") || "python3", args: ["-m", "delphi_ls"] };
}

/** The notification when the server cannot start: the README's install step and the setting that points at it. */
export function startFailureMessage(command: string, args: string[], err: unknown): string {
  return `Delphi's server did not start (${[command, ...args].join(" ")}): ${err}. ` +
    "Install Delphi as its README says (`bash scripts/try.sh` in a Delphi checkout installs it into .venv/ there), " +
    "then set delphi.server.pythonPath to that Python (e.g. <checkout>/.venv/bin/python), or delphi.server.command.";
}

export interface Span { startLine: number; endLine: number; symbol: string | null; preview: string }
export interface ContextResult {
  path: string; uri: string; rank: number; score: number; kind: string;
  branches: Record<string, number>; spans: Span[]; why: string;
}
export interface ContextAnswer {
  results: ContextResult[];
  packed?: { path: string; startLine: number; endLine: number; text: string; whole: boolean }[];
  packedTokens?: number;
  branchesReady?: Record<string, string>;
  /** `cut`: a long question was searched as its head and tail (the server's QUESTION_HEAD_CHARS / TAIL);
   * `meaningOnly`: no file holds a word or name of the question; `namedAnchor`: the file a test question named. */
  query?: { cut?: { chars: number; head: number; tail: number }; meaningOnly?: boolean; namedAnchor?: string };
}

export interface PickItem { label: string; description: string; detail: string; uri: string; line: number }

/** What a lens's `delphi.openTests` carries per file beside its URI (older servers: nothing). */
export interface OpenDetail { line?: number; path?: string; why?: string }

/** One quick-pick row per file a lens names: its path and why (the URI when the server sent no details), and
 * the line to open at (a Rust file's inline test is a line of the file itself). */
export function openTestItems(uris: string[], details?: OpenDetail[]): PickItem[] {
  return uris.map((uri, i) => {
    const d = details?.[i] ?? {};
    return { label: d.path ?? uri, description: "", detail: d.why ?? "", uri, line: Math.max((d.line ?? 1) - 1, 0) };
  });
}

/** One quick-pick row per file: path, its kind and branches, and the why-line. */
export function quickPickItems(answer: ContextAnswer): PickItem[] {
  return answer.results.map((r) => {
    const branches = Object.entries(r.branches).map(([b, k]) => `${b}:${k}`).join(" ");
    const span = r.spans[0];
    return {
      label: `${r.rank}. ${r.path}`,
      description: `${r.kind} · ${branches}`,
      detail: r.why + (span ? ` — L${span.startLine}: ${span.preview}` : ""),
      uri: r.uri,
      line: span ? Math.max(span.startLine - 1, 0) : 0,
    };
  });
}

/** The packed context as Markdown for pasting into a chat. */
export function packedMarkdown(question: string, answer: ContextAnswer): string {
  const parts = [`Context for: ${question}`, ""];
  for (const p of answer.packed ?? []) {
    const lang = p.path.split(".").pop() ?? "";
    parts.push(`### ${p.path}${p.whole ? "" : ` (lines ${p.startLine}-${p.endLine})`}`, "```" + lang, p.text.replace(/\n$/, ""), "```", "");
  }
  return parts.join("\n");
}

export interface HealthSummary {
  workspaces: { ok: boolean; counts: { files: number; chunks: number; vectors: number };
    problems: { severity: string; message: string }[] }[];
}

/** Status bar text: progress while indexing, then green or what is wrong. */
export function statusText(state: { indexing?: { message?: string; percentage?: number }; health?: HealthSummary;
  error?: string }): { text: string; tooltip: string; ok: boolean } {
  if (state.error) return { text: "$(error) Delphi", tooltip: state.error, ok: false };
  if (state.indexing) {
    const pct = state.indexing.percentage !== undefined ? ` ${state.indexing.percentage}%` : "";
    return { text: `$(sync~spin) Delphi${pct}`, tooltip: state.indexing.message ?? "indexing", ok: true };
  }
  const ws = state.health?.workspaces ?? [];
  if (ws.length === 0) return { text: "$(circle-outline) Delphi", tooltip: "starting", ok: true };
  const errors = ws.flatMap((w) => w.problems.filter((p) => p.severity === "error"));
  const files = ws.reduce((n, w) => n + w.counts.files, 0);
  if (errors.length > 0) {
    return { text: `$(warning) Delphi: ${errors.length} problem${errors.length > 1 ? "s" : ""}`,
      tooltip: errors.map((e) => e.message).join("\n"), ok: false };
  }
  return { text: "$(check) Delphi", tooltip: `${files} files indexed; click for the health report`, ok: true };
}

/** The open file as a question's anchor, only when it is a file inside an open workspace folder: the server refuses
 * a request whose anchor is outside every folder, and "Find context…" failed outright on a file opened from
 * site-packages (an editor newcomer, session 25). */
export function anchorsOf(uri: string | undefined, scheme: string | undefined, inWorkspace: boolean): string[] {
  return uri && scheme === "file" && inWorkspace ? [uri] : [];
}
