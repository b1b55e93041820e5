// The agent tools' logic (Copilot agent mode's `languageModelTools`), free of the `vscode` module so plain Node
// can test it against the real server: argument checks, the request each tool sends, and the text the model reads.
// extension.ts only wires these to vscode.lm.registerTool and the running language client.
import { fileURLToPath } from "node:url";

import type { ContextAnswer } from "./logic";

export const CONTEXT_TOOL = "delphi_context";
export const RELATED_TESTS_TOOL = "delphi_related_tests";
export const TOOL_NAMES = [CONTEXT_TOOL, RELATED_TESTS_TOOL] as const;

/** The file kinds the server knows (delphi_ls/api.py KINDS). */
export const KINDS = ["code", "test", "doc", "config", "other"] as const;
export const DEFAULT_BUDGET_TOKENS = 6000;
/** The most a single call may put in the model's context, whatever it asks for. */
export const MAX_BUDGET_TOKENS = 24000;
export const MIN_BUDGET_TOKENS = 500;
export const DEFAULT_LIMIT = 10;
export const MAX_LIMIT = 50;
export const MAX_ANCHORS = 20;
/** The server's own coarse estimate (delphi_ls/retrieval/packing.py CHARS_PER_TOKEN); the cap uses the same one. */
export const CHARS_PER_TOKEN = 4;
/** Tokens kept back from the packing budget for the ranked list printed above the spans (one line per file). */
export const LIST_TOKENS_PER_RESULT = 40;

/** A bad tool input or an unusable answer; the message is written for the model (what to do instead). */
export class ToolError extends Error {}

/** JSON-RPC's MethodNotFound: the running server is older than the request. */
export const METHOD_NOT_FOUND = -32601;

/** How a tool reaches the server: vscode-languageclient's sendRequest in the editor, a jsonrpc connection in tests. */
export type Send = (method: string, params: Record<string, unknown>) => Promise<unknown>;

/** The tools' input schemas; package.json's languageModelTools carry these exactly (test/manifest.test.mjs checks). */
export const CONTEXT_SCHEMA = {
  type: "object",
  properties: {
    query: {
      type: "string",
      description: "The question in plain words, a task description, or an error message or stack trace.",
    },
    anchors: {
      type: "array", items: { type: "string" }, maxItems: MAX_ANCHORS,
      description: "Files already known to matter (absolute or workspace-relative paths): the file being edited, " +
        "files named in the task. Results lean to their neighbours, callers and tests.",
    },
    kinds: {
      type: "array", items: { type: "string", enum: [...KINDS] },
      description: "Only files of these kinds (e.g. [\"test\"] for tests only).",
    },
    limit: {
      type: "integer", minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT,
      description: "How many ranked files to list.",
    },
    budgetTokens: {
      type: "integer", minimum: MIN_BUDGET_TOKENS, maximum: MAX_BUDGET_TOKENS, default: DEFAULT_BUDGET_TOKENS,
      description: "Token budget for the whole answer, the packed code spans included.",
    },
  },
  required: ["query"],
} as const;

export const RELATED_TESTS_SCHEMA = {
  type: "object",
  properties: {
    path: {
      type: "string",
      description: "The source file: an absolute path, a workspace-relative path or a file:// URI.",
    },
    symbol: {
      type: "string",
      description: "A function, class or method defined in that file: only the tests that exercise it.",
    },
    limit: {
      type: "integer", minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT,
      description: "How many test files at most.",
    },
  },
  required: ["path"],
} as const;

export interface ContextToolInput {
  query: string;
  anchors?: string[];
  kinds?: string[];
  limit?: number;
  budgetTokens?: number;
}

export interface RelatedTestsToolInput {
  path: string;
  symbol?: string;
  limit?: number;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function checkKnown(input: Record<string, unknown>, known: string[]): void {
  const unknown = Object.keys(input).filter((k) => !known.includes(k));
  if (unknown.length > 0) throw new ToolError(`unknown input field ${unknown[0]} (known: ${known.join(", ")})`);
}

function intIn(name: string, v: unknown, lo: number, hi: number): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < lo || v > hi) {
    throw new ToolError(`${name} must be an integer between ${lo} and ${hi}`);
  }
  return v;
}

function stringList(name: string, v: unknown, max: number): string[] {
  if (!Array.isArray(v) || !v.every((s) => typeof s === "string" && s.trim() !== "")) {
    throw new ToolError(`${name} must be a list of non-empty strings`);
  }
  if (v.length > max) throw new ToolError(`${name}: at most ${max}`);
  return v.map((s: string) => s.trim());
}

/** The `delphi/context` params for a tool call. A budget over the cap is cut to the cap (and the text says so). */
export function contextParams(input: unknown): { params: Record<string, unknown>; budgetTokens: number; capped: boolean } {
  if (!isObject(input)) throw new ToolError("input must be an object with at least `query`");
  checkKnown(input, Object.keys(CONTEXT_SCHEMA.properties));
  if (typeof input.query !== "string" || input.query.trim() === "") {
    throw new ToolError("query must be a non-empty string: a question, a task description or a stack trace");
  }
  const limit = input.limit === undefined ? DEFAULT_LIMIT : intIn("limit", input.limit, 1, MAX_LIMIT);
  let budget = DEFAULT_BUDGET_TOKENS;
  let capped = false;
  if (input.budgetTokens !== undefined) {
    // The upper bound is a cap rather than an error: asking for more is not a mistake the model can fix.
    budget = intIn("budgetTokens", input.budgetTokens, MIN_BUDGET_TOKENS, Number.MAX_SAFE_INTEGER);
    if (budget > MAX_BUDGET_TOKENS) { budget = MAX_BUDGET_TOKENS; capped = true; }
  }
  const params: Record<string, unknown> = { query: input.query.trim(), limit };
  if (input.anchors !== undefined) {
    const anchors = stringList("anchors", input.anchors, MAX_ANCHORS);
    if (anchors.length > 0) params.anchors = anchors;
  }
  if (input.kinds !== undefined) {
    const kinds = stringList("kinds", input.kinds, KINDS.length);
    const bad = kinds.find((k) => !(KINDS as readonly string[]).includes(k));
    if (bad !== undefined) throw new ToolError(`kinds: ${JSON.stringify(bad)} is not one of ${KINDS.join(", ")}`);
    if (kinds.length > 0) params.kinds = kinds;
  }
  // The ranked list is printed above the packed spans and counts against the same budget.
  params.budgetTokens = Math.max(budget - LIST_TOKENS_PER_RESULT * limit, Math.floor(budget / 2));
  return { params, budgetTokens: budget, capped };
}

/** The `delphi/relatedTests` params for a tool call. */
export function relatedTestsParams(input: unknown): Record<string, unknown> {
  if (!isObject(input)) throw new ToolError("input must be an object with at least `path`");
  checkKnown(input, Object.keys(RELATED_TESTS_SCHEMA.properties));
  if (typeof input.path !== "string" || input.path.trim() === "") {
    throw new ToolError("path must be a non-empty file path (absolute, workspace-relative or a file:// URI)");
  }
  const params: Record<string, unknown> = { path: input.path.trim() };
  if (input.symbol !== undefined) {
    if (typeof input.symbol !== "string" || input.symbol.trim() === "") throw new ToolError("symbol must be a non-empty string");
    params.symbol = input.symbol.trim();
  }
  params.limit = input.limit === undefined ? DEFAULT_LIMIT : intIn("limit", input.limit, 1, MAX_LIMIT);
  return params;
}

/** A fence longer than any backtick run in the text, so a span holding ``` cannot close it early. */
function fence(text: string): string {
  const longest = Math.max(2, ...(text.match(/`+/g) ?? []).map((r) => r.length));
  return "`".repeat(longest + 1);
}

/**
 * The info string after an opening fence: the file's extension when it is a plain word, else nothing. A name
 * such as "evil.\n```\n2. SECRET" would otherwise close the fence from its info string (delphi_ls/shown.py).
 */
export function fenceLang(path: string): string {
  const base = path.split("/").pop() ?? "";
  const ext = base.includes(".") ? base.split(".").pop() ?? "" : "";
  return /^[A-Za-z0-9+#-]{1,10}$/.test(ext) ? ext : "";
}

/** The workspace folder a result lives in, from its URI and workspace-relative path (paths the agent can open). */
function rootOf(uri: string, path: string): string | undefined {
  try {
    const abs = fileURLToPath(uri);
    const rel = path.split("/").join(abs.includes("\\") ? "\\" : "/");
    return abs.endsWith(rel) ? abs.slice(0, abs.length - rel.length).replace(/[\\/]$/, "") : undefined;
  } catch {
    return undefined;
  }
}

function indexNote(answer: ContextAnswer & { indexing?: { phase?: string; done?: number; total?: number } }): string[] {
  const notes: string[] = [];
  if (answer.indexing?.phase === "catch-up") {
    notes.push("Note: Delphi is still looking for files changed since it last ran (usually none); results come from " +
      "the index as it was — search with grep too for a file you just changed.");
  } else if (answer.indexing?.phase === "changes") {
    // As the MCP text says it (delphi_ls/mcp/tools.py indexing_line): a checkout's files, about to be indexed.
    notes.push("Note: files changed on disk (a checkout?) are about to be indexed; results come from the index " +
      "before them and their lines may have moved — ask again shortly.");
  } else if (answer.indexing?.phase === "elsewhere") {
    notes.push(`Note: another Delphi process is indexing this folder (${answer.indexing.done ?? "?"} files so ` +
      "far); results come from what it has committed — search with grep too.");
  } else if (answer.indexing) {
    const { phase, done, total } = answer.indexing;
    notes.push(`Note: Delphi is still indexing (${phase ?? "indexing"} ${done ?? "?"}/${total ?? "?"}); ` +
      "results may miss files indexed later — search with grep too.");
  }
  const cut = answer.query?.cut;
  if (cut) {
    notes.push(`Note: the question has ${cut.chars} characters; Delphi searched its first ${cut.head} and last ` +
      `${cut.tail}.`);
  }
  if (answer.query?.meaningOnly) {
    // As the CLI and MCP say it (delphi_ls/shown.py meaning_note): a nonsense word still gets files by meaning.
    notes.push("Note: no file holds a word or name of the question; these files are only similar in meaning — " +
      "search with grep too.");
  }
  if (answer.query?.namedAnchor) {
    notes.push(`Note: asked around ${shown(answer.query.namedAnchor)}, the file the question names.`);
  }
  // "ready (not used for this query shape)" and "off: ..." (turned off by settings, or no git history) are
  // not problems to tell the model about; "partial", "not ready", "disabled" and "error" are.
  const notReady = Object.entries(answer.branchesReady ?? {}).filter(([, s]) => !/^(ready|off)\b/.test(s));
  if (notReady.length > 0) notes.push(`Note: branches not ready: ${notReady.map(([b, s]) => `${b} (${shown(s)})`).join("; ")}.`);
  return notes;
}

/**
 * A path or one-line field as the model reads it: control characters, newlines included, as `\xNN` text, so a
 * file named "evil\n2. SECRET.py" cannot add a line to the ranked list (the server's delphi_ls/shown.py).
 */
export function shown(s: string): string {
  return s
    // eslint-disable-next-line no-control-regex
    .replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`)
    // Line separators split a line for many readers; bidi controls make a name read as another (trojan source).
    .replace(/[\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g,
      (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** The question in one header line: pasted logs run to megabytes and would push the answer out of the budget. */
export const QUESTION_SHOWN_CHARS = 200;
function shownQuestion(q: string): string {
  const more = q.length - QUESTION_SHOWN_CHARS;
  return shown(q.slice(0, QUESTION_SHOWN_CHARS)) + (more > 0 ? ` (+${more} more characters)` : "");
}

/**
 * The text the model reads for a context answer: one line per ranked file, "path:Lstart-Lend — why", then the
 * packed spans, fenced. Never longer than budgetTokens (by the server's chars-per-token estimate): packed spans
 * that would pass it are left out, and the text says how many.
 */
export function formatContext(answer: ContextAnswer & { indexing?: Record<string, unknown> }, query: string,
  budgetTokens: number, capped = false): string {
  const maxChars = Math.min(budgetTokens, MAX_BUDGET_TOKENS) * CHARS_PER_TOKEN;
  const head: string[] = [`Delphi context for: ${shownQuestion(query)}`];
  if (capped) head.push(`(budgetTokens cut to the cap of ${MAX_BUDGET_TOKENS})`);
  head.push(...indexNote(answer as ContextAnswer));
  if (answer.results.length === 0) {
    head.push("No files matched. Try other words (names from the code, an error message), or grep for exact strings.");
    return head.join("\n");
  }
  const root = rootOf(answer.results[0].uri, answer.results[0].path);
  if (root) head.push(`Paths are relative to ${root}`);
  head.push("", "Ranked files, best first (read the first ones before searching further):");
  for (const r of answer.results) {
    const span = r.spans[0];
    const where = span ? `${shown(r.path)}:L${span.startLine}-L${span.endLine}` : shown(r.path);
    head.push(`${r.rank}. ${where} — ${shown(r.why)}`);
  }
  let text = head.join("\n");
  // A tiny budget with many results: the list alone is cut, with no spans.
  if (text.length > maxChars) return text.slice(0, maxChars);
  const packed = answer.packed ?? [];
  if (packed.length === 0) return text;
  text += `\n\nThe best spans (about ${answer.packedTokens ?? 0} tokens):`;
  const room = maxChars - 100; // keeps space for the "left out" line
  let left = 0;
  for (const p of packed) {
    const body = p.text.replace(/\n$/, "");
    const f = fence(body);
    const lang = fenceLang(p.path);
    const block = `\n\n${shown(p.path)}${p.whole ? " (whole file)" : `:L${p.startLine}-L${p.endLine}`}\n${f}${lang}\n${body}\n${f}`;
    // Spans come best first: once one does not fit, the rest are left out rather than reordered.
    if (left > 0 || text.length + block.length > room) { left++; continue; }
    text += block;
  }
  if (left > 0) text += `\n\n(${left} more span${left > 1 ? "s" : ""} left out to stay within ${budgetTokens} tokens.)`;
  return text;
}

export interface RelatedItem { path: string; uri?: string; why: string; score?: number }

/** The text the model reads for related tests: one line per test file, best first, with why. */
export function formatRelatedTests(answer: { results: RelatedItem[] }, path: string, symbol?: string): string {
  const what = symbol ? `\`${symbol}\` in ${path}` : path;
  if (answer.results.length === 0) {
    return `Delphi found no tests related to ${what}. It pairs tests by file name, imports and calls; ` +
      "new code may have none yet. To check, grep the test folders for the name.";
  }
  const lines = [`Tests related to ${what}, best first:`];
  answer.results.forEach((t, i) => lines.push(`${i + 1}. ${shown(t.path)} — ${shown(t.why)}`));
  return lines.join("\n");
}

function rpcCode(err: unknown): number | undefined {
  return isObject(err) && typeof err.code === "number" ? err.code : undefined;
}

/** Runs delphi_context: checks the input, asks the server, formats the answer. */
export async function runContextTool(send: Send, input: unknown): Promise<string> {
  const { params, budgetTokens, capped } = contextParams(input);
  const answer = (await send("delphi/context", params)) as ContextAnswer;
  return formatContext(answer, params.query as string, budgetTokens, capped);
}

/** Runs delphi_related_tests. A server without `delphi/relatedTests` is named as such, not as a failed search. */
export async function runRelatedTestsTool(send: Send, input: unknown): Promise<string> {
  const params = relatedTestsParams(input);
  let answer: { results: RelatedItem[] };
  try {
    answer = (await send("delphi/relatedTests", params)) as { results: RelatedItem[] };
  } catch (err) {
    if (rpcCode(err) === METHOD_NOT_FOUND) {
      throw new ToolError("this delphi-ls has no delphi/relatedTests (it is older than the extension); " +
        "update Delphi, and meanwhile look for tests named after the file or grep for the symbol");
    }
    throw err;
  }
  return formatRelatedTests(answer, params.path as string, params.symbol as string | undefined);
}

/** The progress line VS Code shows while a tool runs. */
export function invocationMessage(tool: string, input: unknown): string {
  const i = isObject(input) ? input : {};
  const short = (v: unknown) => {
    const t = typeof v === "string" ? v.trim().replace(/\s+/g, " ") : "";
    return t.length > 80 ? t.slice(0, 79) + "…" : t;
  };
  if (tool === CONTEXT_TOOL) return `Delphi: finding context for "${short(i.query)}"`;
  return `Delphi: finding tests related to ${short(i.path)}${i.symbol ? ` (${short(i.symbol)})` : ""}`;
}

/** What the model sees when a tool cannot answer at all. */
export function toolFailure(tool: string, err: unknown): string {
  const why = err instanceof Error ? err.message : String(err);
  return `${tool} failed: ${why}. Use the workspace text search or grep instead.`;
}
