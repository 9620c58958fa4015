import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { allPages } from "@hookpost/contract/admin-pages";
import { BadRequestSchema } from "@hookpost/contract/gen/google/rpc/error_details_pb";
import { AdminService } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { getToken } from "./session.js";

export { Code };

/** Adds the session's admin token to every call. */
const auth: Interceptor = (next) => (req) => {
  const token = getToken();
  if (token) req.header.set("authorization", `Bearer ${token}`);
  return next(req);
};

/** AdminService over the Connect protocol, on the origin that served the console. */
export const admin = createClient(
  AdminService,
  createConnectTransport({ baseUrl: window.location.origin, interceptors: [auth] }),
);

/** A message's page: a message is identified by its source and message id. */
export function messageHref(messageId: string, sourceId: string): string {
  const q = sourceId ? `?source=${encodeURIComponent(sourceId)}` : "";
  return `/console/messages/${encodeURIComponent(messageId)}${q}`;
}

/** Every source, page after page (lists answer at most a page each). */
export const allSources = () =>
  allPages(async (pageToken) => {
    const r = await admin.listSources({ pageToken });
    return { items: r.sources, nextPageToken: r.nextPageToken };
  });

export const allDestinations = () =>
  allPages(async (pageToken) => {
    const r = await admin.listDestinations({ pageToken });
    return { items: r.destinations, nextPageToken: r.nextPageToken };
  });

export const allDestinationHealth = () =>
  allPages(async (pageToken) => {
    const r = await admin.listDestinationHealth({ pageToken });
    return { items: r.destinations, nextPageToken: r.nextPageToken };
  });

/** An API failure, as the pages show it: a code, a readable message and the fields at fault. */
export interface ApiError {
  code: Code;
  message: string;
  violations: Array<{ field: string; description: string }>;
}

export function apiError(err: unknown): ApiError {
  const ce = ConnectError.from(err);
  const violations = ce
    .findDetails(BadRequestSchema)
    .flatMap((b) => b.fieldViolations.map((v) => ({ field: v.field, description: v.description })));
  let message = ce.rawMessage;
  // fetch() itself failed (server down, network gone): no answer came, so no code either.
  const noAnswer = ce.code === Code.Unknown && ce.cause instanceof TypeError;
  if (ce.code === Code.Unimplemented) {
    message = `This server does not offer this yet (${ce.rawMessage}). Upgrade Hookpost to use it.`;
  } else if (noAnswer || (ce.code === Code.Unavailable && message === "")) {
    message = "The Hookpost server cannot be reached.";
  }
  return { code: noAnswer ? Code.Unavailable : ce.code, message, violations };
}

/** Listeners told when a call was refused for the token (and why): the app signs out. */
const unauthenticated = new Set<(error: ApiError) => void>();
export function onUnauthenticated(fn: (error: ApiError) => void): () => void {
  unauthenticated.add(fn);
  return () => unauthenticated.delete(fn);
}

/** Runs a call; a refused token signs out everywhere, and errors come back as ApiError. */
export async function call<T>(
  fn: () => Promise<T>,
): Promise<{ ok: true; value: T } | { ok: false; error: ApiError }> {
  try {
    return { ok: true, value: await fn() };
  } catch (err) {
    const error = apiError(err);
    if (error.code === Code.Unauthenticated) for (const f of unauthenticated) f(error);
    return { ok: false, error };
  }
}
