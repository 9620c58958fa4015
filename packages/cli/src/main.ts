import { readFileSync } from "node:fs";
import { clientSetting } from "@hookpost/contract";
import { Command, CommanderError, Option } from "commander";
import { applyCommand } from "./commands/apply.js";
import { attemptsCommand } from "./commands/attempts.js";
import { auditCommand } from "./commands/audit.js";
import { deadLettersCommand } from "./commands/dead-letters.js";
import { deleteUserCommand } from "./commands/delete-user.js";
import { deletionCommand } from "./commands/deletion.js";
import { destinationsCommand } from "./commands/destinations.js";
import { messagesCommand } from "./commands/messages.js";
import { operatorWebhooksCommand } from "./commands/operator-webhooks.js";
import { portalLinksCommand } from "./commands/portal-links.js";
import { secretsCommand } from "./commands/secrets.js";
import { sendCommand } from "./commands/send.js";
import { sourcesCommand } from "./commands/sources.js";
import {
  Context,
  DEFAULT_ENDPOINT,
  DEFAULT_TIMEOUT_MS,
  type GlobalOptions,
  type Session,
} from "./context.js";
import { EXIT_USAGE, renderError } from "./errors.js";
import { exitQuietlyOnClosedPipe, type Io, Output, processIo } from "./output.js";
import { positiveInt } from "./parse.js";

/**
 * `hookpost …`: the operator command line over AdminService (and a few IngestService calls).
 * Resolves to the exit status: 0 ok, 1 failed, 2 bad command line.
 */
export async function runCli(argv: string[], io: Io = processIo): Promise<number> {
  if (io === processIo) exitQuietlyOnClosedPipe();
  let ctx: Context | undefined;
  // Built by the command's action, once commander has parsed every option.
  const session: Session = {
    context(command) {
      const opts = command.optsWithGlobals<GlobalOptions>();
      ctx ??= new Context(opts, new Output(io, Boolean(opts.json)));
      return ctx;
    },
  };
  const program = buildProgram(session, io);
  try {
    await program.parseAsync(argv, { from: "user" });
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : EXIT_USAGE;
    const json = ctx ? ctx.out.json : argv.includes("--json");
    const rendered = renderError(err, ctx ?? { endpoint: endpointGuess(argv), auth: undefined });
    const out = ctx?.out ?? new Output(io, json);
    if (json) out.jsonError(rendered.json);
    else for (const line of rendered.lines) out.note(line);
    return rendered.exitCode;
  } finally {
    ctx?.close();
  }
}

export function buildProgram(session: Session, io: Io): Command {
  const program = new Command("hookpost")
    .description("Operate a Hookpost installation: sources, webhook destinations, dead letters.")
    .version(version(), "-V, --version")
    .addOption(
      new Option("--endpoint <host:port>", "the ingest's gRPC address (https://… for TLS)")
        .env("HOOKPOST_ENDPOINT")
        .default(DEFAULT_ENDPOINT),
    )
    .addOption(new Option("--token <token>", "the admin token (prefer the env var)").env("ADMIN_TOKEN"))
    .option("--json", "machine-readable output (JSON on stdout; errors as JSON on stderr)")
    .option("--tls", "connect with TLS")
    .option("--ca-file <file>", "trust this CA certificate (PEM) for TLS; implies --tls")
    .addOption(
      new Option("--timeout <ms>", "deadline of each call")
        .argParser(positiveInt(3_600_000))
        .default(DEFAULT_TIMEOUT_MS),
    )
    .showHelpAfterError("(run with --help for usage)")
    .addHelpText(
      "after",
      `
Examples:
  export ADMIN_TOKEN=…
  hookpost sources create "Web app" --id web
  hookpost destinations create --name CRM --source web --url https://crm.example.com/hooks --secret-env CRM_SECRET
  hookpost apply -f hookpost.yaml
  hookpost send track --write-key "$KEY" --user-id u1 --event "Signed Up" --properties '{"plan":"pro"}'
  hookpost dead-letters list --destination crm
  hookpost audit list --resource crm`,
    );

  for (const cmd of [
    sourcesCommand(session),
    destinationsCommand(session),
    operatorWebhooksCommand(session),
    applyCommand(session),
    sendCommand(session),
    deleteUserCommand(session),
    deletionCommand(session),
    deadLettersCommand(session),
    attemptsCommand(session),
    messagesCommand(session),
    auditCommand(session),
    portalLinksCommand(session),
    secretsCommand(session),
  ]) {
    program.addCommand(cmd);
  }

  // Every command reports usage errors the same way, and never calls process.exit itself.
  const configure = (cmd: Command) => {
    cmd.exitOverride().configureOutput({
      writeOut: (s) => io.stdout(s),
      writeErr: (s) => io.stderr(s),
    });
    if (cmd !== program) cmd.showHelpAfterError("(run with --help for usage)");
    for (const sub of cmd.commands) configure(sub);
  };
  configure(program);
  return program;
}

function version(): string {
  // packages/cli/src/main.ts runs from the repo (tsx) or from dist/cli/main.js (built).
  for (const rel of ["../package.json", "../../package.json"]) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), "utf8")) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === "@hookpost/cli" && pkg.version) return pkg.version;
    } catch {
      // try the next place
    }
  }
  return "0.0.0";
}

function endpointGuess(argv: string[]): string {
  const i = argv.indexOf("--endpoint");
  const inline = argv.find((a) => a.startsWith("--endpoint="));
  return (
    (i >= 0 ? argv[i + 1] : inline?.slice("--endpoint=".length)) ??
    clientSetting("HOOKPOST_ENDPOINT") ??
    DEFAULT_ENDPOINT
  );
}
