import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { parseDuration } from "@hookpost/contract";
import type { PortalLink } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { Command } from "commander";
import type { Session } from "../context.js";
import { UsageError } from "../errors.js";
import { everyItem } from "../pages.js";
import { iso } from "../views.js";
import { idCommand } from "./id-command.js";

interface PortalLinkView {
  id: string;
  sourceId: string;
  name: string;
  readOnly: boolean;
  state: "working" | "expired" | "revoked";
  createTime: string | null;
  expireTime: string | null;
  revokeTime: string | null;
  createdBy: string;
}

function portalLinkView(l: PortalLink, now = Date.now()): PortalLinkView {
  const expireTime = iso(l.expireTime);
  const state = l.revokeTime
    ? "revoked"
    : expireTime !== null && Date.parse(expireTime) <= now
      ? "expired"
      : "working";
  return {
    id: l.id,
    sourceId: l.sourceId,
    name: l.name,
    readOnly: l.readOnly,
    state,
    createTime: iso(l.createTime),
    expireTime,
    revokeTime: iso(l.revokeTime),
    createdBy: l.createdBy,
  };
}

/** `hookpost portal-links create|list|revoke`: console links limited to one source. */
export function portalLinksCommand(session: Session): Command {
  const cmd = new Command("portal-links").description(
    "console links limited to one source and its destinations, for the customer who owns them",
  );

  cmd
    .command("create")
    .description("create a portal link and print its URL (shown once)")
    .requiredOption("--source <id>", "the source the link is limited to")
    .option("--lifetime <duration>", "how long it works: 1m to 30d", "24h")
    .option("--read-only", "only reads: no change of any kind")
    .option("--name <label>", "a label for operators (at most 100 characters)", "")
    .action(
      async (
        opts: { source: string; lifetime: string; readOnly?: boolean; name: string },
        command: Command,
      ) => {
        let lifetimeMs: number;
        try {
          lifetimeMs = parseDuration(opts.lifetime);
        } catch (err) {
          throw new UsageError(`--lifetime: ${(err as Error).message}`);
        }
        const ctx = session.context(command);
        const res = await ctx.admin().createPortalLink({
          sourceId: opts.source,
          lifetime: durationFromMs(lifetimeMs),
          readOnly: Boolean(opts.readOnly),
          name: opts.name,
        });
        const link = portalLinkView(res.portalLink!);
        if (ctx.out.json) return ctx.out.data({ portalLink: link, url: res.url, token: res.token });
        ctx.out.line(
          `Created portal link ${link.id} for source ${link.sourceId} (${link.readOnly ? "read-only" : "read and write"}), working until ${link.expireTime}.`,
        );
        ctx.out.shownOnce(
          "URL (shown once; whoever holds it has the link's access until it expires or is revoked)",
          [res.url],
        );
        if (res.url.startsWith("/")) {
          ctx.out.note(
            "(set CONSOLE_URL on ingest to get whole URLs; prefix this one with the console's host)",
          );
        }
        ctx.out.note(`Revoke it with: hookpost portal-links revoke ${link.id}`);
      },
    );

  cmd
    .command("list")
    .description("list a source's portal links (working, expired and revoked), never their tokens")
    .requiredOption("--source <id>", "the source")
    .action(async (opts: { source: string }, command: Command) => {
      const ctx = session.context(command);
      const all = await everyItem(
        (pageToken) => ctx.admin().listPortalLinks({ sourceId: opts.source, pageToken }),
        (r) => r.portalLinks,
      );
      ctx.out.list(
        all.map((l) => portalLinkView(l)),
        ["ID", "NAME", "ACCESS", "STATE", "CREATED", "EXPIRES", "BY"],
        (l) => [
          l.id,
          l.name,
          l.readOnly ? "read-only" : "read-write",
          l.state === "revoked" ? `revoked ${l.revokeTime}` : l.state,
          l.createTime ?? "",
          l.expireTime ?? "",
          l.createdBy,
        ],
        `No portal links for source ${opts.source}. Create one with: hookpost portal-links create --source ${opts.source}`,
      );
    });

  idCommand(session, cmd, "revoke", "link id (pl_…)", async (id, ctx) => {
    const res = await ctx.admin().revokePortalLink({ id });
    const link = portalLinkView(res.portalLink!);
    if (ctx.out.json) return ctx.out.data(link);
    ctx.out.line(`Revoked portal link ${link.id} (source ${link.sourceId}) at ${link.revokeTime}.`);
  }).description("revoke a portal link: its token stops working at once");

  return cmd;
}
