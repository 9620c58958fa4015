import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { admin } from "./api.js";
import { absolute } from "./format.js";

/**
 * The console opened with a portal link: one source's world. The server decides what the link
 * may do (every call is checked against its source); the console only leaves out what the link
 * cannot use, so nobody meets a page that can only refuse.
 */
export interface Portal {
  linkId: string;
  sourceId: string;
  sourceName: string;
  readOnly: boolean;
  expireTime: Timestamp | undefined;
}

let current: Portal | undefined;

/** The portal of this tab; undefined with the admin token. */
export function portal(): Portal | undefined {
  return current;
}

/** A portal link that may only read: the pages show no button that changes something. */
export function readOnly(): boolean {
  return current?.readOnly === true;
}

/** Reads who the link is (and its source's name); rejects when the server refuses the token. */
export async function loadPortal(): Promise<Portal> {
  const me = await admin.getCaller({});
  const link = me.portalLink;
  if (!link) throw new Error("this session is not a portal link");
  const { source } = await admin.getSource({ id: link.sourceId });
  current = {
    linkId: link.id,
    sourceId: link.sourceId,
    sourceName: source?.name ?? link.sourceId,
    readOnly: link.readOnly,
    expireTime: link.expireTime,
  };
  return current;
}

export function forgetPortal(): void {
  current = undefined;
}

/** Routes of the operator's pages, which a portal link cannot reach. */
export const OPERATOR_ROUTES = ["sources", "audit", "deletions"];

/** Under the header: whose world this is, and until when. */
export function PortalBanner({ p }: { p: Portal }) {
  return (
    <p class="portal-banner muted small-text" data-testid="portal-banner">
      Source <strong>{p.sourceName}</strong> ({p.sourceId}) · {p.readOnly ? "read-only link" : "portal link"}
      {p.expireTime ? `, works until ${absolute(p.expireTime)}` : ""}
    </p>
  );
}

/** A portal link the server refused (expired, revoked, unknown), or closed: why, and what to do. */
export function PortalEnded({ title, message }: { title: string; message: string }) {
  return (
    <main class="container sign-in">
      <article data-testid="portal-ended">
        <h1>{title}</h1>
        <p class="notice notice-error" role="alert">
          {message}
        </p>
        <p class="muted">Portal links work for a limited time, and can be revoked before.</p>
      </article>
    </main>
  );
}
