// The MCP server definitions the extension offers VS Code (one stdio `delphi mcp <folder>` per workspace folder),
// free of the `vscode` module so plain Node can test them. extension.ts turns each into a McpStdioServerDefinition.
import { ConfigReader, initializationOptions } from "./logic";

export const MCP_PROVIDER_ID = "delphi.mcpServers";

export interface Folder { name: string; fsPath: string; scheme: string }

export interface McpStdioSpec {
  label: string;
  command: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  version: string;
}

/**
 * Options for the language server's front (not engine settings): with the MCP server on, the language server also
 * serves MCP over loopback HTTP (a bearer token beside the index), and `delphi mcp <folder>` forwards to it instead
 * of opening the index a second time, so agents get the editor's warm index.
 */
export function frontOptions(cfg: ConfigReader): Record<string, unknown> {
  return cfg.get<boolean>("mcpServer.enabled") === false ? {} : { mcpHttp: true };
}

/**
 * The settings the user set in VS Code, as the DELPHI_* variables delphi_ls/settings.py reads, so the MCP server
 * opens the same index with the same models as the language server. A value the variable cannot carry (a list
 * item holding a comma) is left out and named in `problems`, never passed mangled.
 */
export function settingsEnv(cfg: ConfigReader): { env: Record<string, string>; problems: string[] } {
  const env: Record<string, string> = {};
  const problems: string[] = [];
  for (const [key, value] of Object.entries(initializationOptions(cfg))) {
    const name = "DELPHI_" + key.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toUpperCase();
    if (Array.isArray(value)) {
      const bad = value.find((v) => typeof v !== "string" || v.includes(","));
      if (bad !== undefined) {
        problems.push(`delphi.${key}: ${JSON.stringify(bad)} cannot be passed to the MCP server (a comma separates items)`);
        continue;
      }
      env[name] = value.join(",");
    } else if (typeof value === "object" && value !== null) {
      env[name] = Object.entries(value as Record<string, unknown>).map(([k, v]) => `${k}=${v}`).join(",");
    } else {
      env[name] = String(value);
    }
  }
  return { env, problems };
}

/**
 * What starts `delphi mcp`, from the settings that start the language server: delphi.mcpServer.command when set;
 * else from delphi.server.command (`.../delphi-ls` -> `.../delphi mcp`, `PY -m delphi_ls` -> `PY -m delphi_ls.cli
 * mcp`; it was ignored, and the MCP server ran `python3 -m delphi_ls.cli` on the system Python: "No module named
 * 'delphi_ls'", an agent newcomer, session 26); else delphi.server.pythonPath. A string: why none can be made.
 */
export function mcpCommand(cfg: ConfigReader): { command: string; args: string[] } | string {
  const own = cfg.get<string[]>("mcpServer.command") ?? [];
  if (own.length > 0) return { command: own[0], args: own.slice(1) };
  const cmd = cfg.get<string[]>("server.command") ?? [];
  if (cmd.length > 0) {
    const exe = cmd[0];
    const base = exe.split(/[\\/]/).pop() ?? exe;
    if (/^delphi-ls(\.exe)?$/i.test(base) && cmd.length === 1) {
      return { command: exe.slice(0, exe.length - base.length) + base.replace(/^delphi-ls/i, "delphi"), args: ["mcp"] };
    }
    const m = cmd.indexOf("-m");
    if (m > 0 && cmd[m + 1] === "delphi_ls" && m + 2 === cmd.length) {
      return { command: exe, args: [...cmd.slice(1, m), "-m", "delphi_ls.cli", "mcp"] };
    }
    return `delphi.server.command ${JSON.stringify(cmd)} does not say how to start \`delphi mcp\`; set delphi.mcpServer.command ` +
      '(e.g. ["/path/to/.venv/bin/delphi", "mcp"])';
  }
  return { command: cfg.get<string>("server.pythonPath") || "python3", args: ["-m", "delphi_ls.cli", "mcp"] };
}

/**
 * One stdio MCP server per local workspace folder (mcpCommand, then the folder). Folders on other file systems
 * (remote, virtual) have no path the server could index and get none; nor does any when no command can be made.
 */
export function mcpServerSpecs(folders: readonly Folder[], cfg: ConfigReader, version: string): McpStdioSpec[] {
  const start = mcpCommand(cfg);
  if (typeof start === "string") return [];
  const { env } = settingsEnv(cfg);
  return folders.filter((f) => f.scheme === "file").map((f) => ({
    label: folders.length > 1 ? `Delphi (${f.name})` : "Delphi",
    command: start.command,
    args: [...start.args, f.fsPath],
    cwd: f.fsPath,
    env,
    version,
  }));
}
