import * as vscode from "vscode";
import { LanguageClient, LanguageClientOptions, ServerOptions, State, TransportKind } from "vscode-languageclient/node";
import {
  ContextAnswer, HealthSummary, initializationOptions, packedMarkdown, quickPickItems, ServerSettingKey, serverCommand,
  statusText,
} from "./logic";

let client: LanguageClient | undefined;
let status: vscode.StatusBarItem;
let indexing: { message?: string; percentage?: number } | undefined;

function reader(): { get<T>(k: string): T | undefined; isSet(k: string): boolean } {
  const cfg = vscode.workspace.getConfiguration("delphi");
  return {
    get: <T>(k: string) => cfg.get<T>(k),
    isSet: (k: string) => {
      const i = cfg.inspect(k as ServerSettingKey);
      return !!i && (i.globalValue !== undefined || i.workspaceValue !== undefined || i.workspaceFolderValue !== undefined);
    },
  };
}

async function start(context: vscode.ExtensionContext): Promise<void> {
  const cfg = reader();
  const { command, args } = serverCommand(cfg);
  const serverOptions: ServerOptions = { command, args, transport: TransportKind.stdio };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: "file" }],
    initializationOptions: initializationOptions(cfg),
    synchronize: { fileEvents: vscode.workspace.createFileSystemWatcher("**/*") },
  };
  client = new LanguageClient("delphi", "Delphi", serverOptions, clientOptions);
  client.onDidChangeState((e) => { if (e.newState === State.Stopped) refreshStatus("the server stopped"); });
  try {
    await client.start();
  } catch (err) {
    const msg = `Delphi's server did not start (${command} ${args.join(" ")}): ${err}. ` +
      "Install it with `pip install delphi-ls` (or the repository's scripts/try.sh) and set delphi.server.pythonPath.";
    refreshStatus(msg);
    const pick = await vscode.window.showErrorMessage(msg, "Open settings", "Restart");
    if (pick === "Open settings") await vscode.commands.executeCommand("workbench.action.openSettings", "delphi.server");
    if (pick === "Restart") await vscode.commands.executeCommand("delphi.restart");
    return;
  }
  client.onNotification("$/progress", (p: { value?: { kind: string; message?: string; percentage?: number } }) => {
    if (!p.value) return;
    indexing = p.value.kind === "end" ? undefined : { message: p.value.message, percentage: p.value.percentage };
    if (p.value.kind === "end") void pollHealth(); else refreshStatus();
  });
  void pollHealth();
  context.subscriptions.push({ dispose: () => void client?.stop() });
}

async function pollHealth(): Promise<HealthSummary | undefined> {
  if (!client) return undefined;
  try {
    const h = await client.sendRequest<HealthSummary>("delphi/health", {});
    refreshStatus(undefined, h);
    return h;
  } catch (err) {
    refreshStatus(String(err));
    return undefined;
  }
}

function refreshStatus(error?: string, health?: HealthSummary): void {
  const s = statusText({ indexing, health, error });
  status.text = s.text;
  status.tooltip = s.tooltip;
  status.backgroundColor = s.ok ? undefined : new vscode.ThemeColor("statusBarItem.warningBackground");
  status.show();
}

async function ask(extra: Record<string, unknown>): Promise<{ question: string; answer: ContextAnswer } | undefined> {
  if (!client) { void vscode.window.showErrorMessage("Delphi's server is not running."); return undefined; }
  const editor = vscode.window.activeTextEditor;
  const selected = editor && !editor.selection.isEmpty ? editor.document.getText(editor.selection) : "";
  const question = await vscode.window.showInputBox({ prompt: "Ask Delphi", value: selected.slice(0, 500),
    placeHolder: "where is TLS set up for the gRPC proxy?" });
  if (!question) return undefined;
  const anchors = editor && editor.document.uri.scheme === "file" ? [editor.document.uri.toString()] : [];
  const answer = await client.sendRequest<ContextAnswer>("delphi/context", { query: question, anchors, ...extra });
  return { question, answer };
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 50);
  status.command = "delphi.showHealth";
  context.subscriptions.push(status);
  context.subscriptions.push(
    vscode.commands.registerCommand("delphi.findContext", async () => {
      const got = await ask({ limit: 20 });
      if (!got) return;
      const item = await vscode.window.showQuickPick(quickPickItems(got.answer), { matchOnDescription: true, matchOnDetail: true });
      if (!item) return;
      const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(item.uri));
      const pos = new vscode.Position(item.line, 0);
      await vscode.window.showTextDocument(doc, { selection: new vscode.Range(pos, pos) });
    }),
    vscode.commands.registerCommand("delphi.copyContext", async () => {
      const budget = Number(await vscode.window.showInputBox({ prompt: "Token budget", value: "4000" })) || 4000;
      const got = await ask({ budgetTokens: budget });
      if (!got) return;
      await vscode.env.clipboard.writeText(packedMarkdown(got.question, got.answer));
      void vscode.window.showInformationMessage(`Delphi: copied ${got.answer.packedTokens ?? 0} tokens of context.`);
    }),
    vscode.commands.registerCommand("delphi.showHealth", async () => {
      const h = await pollHealth();
      const doc = await vscode.workspace.openTextDocument({ language: "json", content: JSON.stringify(h ?? {}, null, 2) });
      await vscode.window.showTextDocument(doc);
    }),
    vscode.commands.registerCommand("delphi.reindex", async () => {
      await client?.sendRequest("workspace/executeCommand", { command: "delphi.reindex", arguments: [] });
    }),
    vscode.commands.registerCommand("delphi.restart", async () => {
      await client?.stop().catch(() => undefined);
      client = undefined;
      await start(context);
    }),
    // Also opens the source a test exercises (the lens on a test file passes its own placeholder).
    vscode.commands.registerCommand("delphi.openTests", async (uris: string[], placeHolder?: string) => {
      if (!uris || uris.length === 0) return;
      const pick = uris.length === 1 ? uris[0] : await vscode.window.showQuickPick(uris, { placeHolder: placeHolder ?? "Related tests" });
      if (pick) await vscode.window.showTextDocument(vscode.Uri.parse(pick));
    }),
  );
  refreshStatus();
  await start(context);
}

export async function deactivate(): Promise<void> {
  await client?.stop();
}
