import { PORTAL_FRAGMENT_KEY } from "@hookpost/contract/portal-links";

/**
 * The session's credential lives in sessionStorage only: gone when the tab closes, never logged.
 * The admin token is typed in (never in a URL); a portal link's token arrives in the URL's
 * fragment (`/console/#portal=<token>`), which browsers send to no server and put in no Referer,
 * and is taken out of the address bar and the history at once.
 */
const KEY = "hookpost.adminToken";
/** "portal" while the credential is a portal link's token. */
const KIND = "hookpost.sessionKind";
/** Why the tab's portal ended (JSON {title, message}): a reload shows it again, not a sign-in form. */
const ENDED = "hookpost.portalEnded";

export function getToken(): string | undefined {
  return sessionStorage.getItem(KEY) ?? undefined;
}

export function setToken(token: string): void {
  sessionStorage.setItem(KEY, token);
  sessionStorage.removeItem(KIND);
  sessionStorage.removeItem(ENDED);
}

export function clearToken(): void {
  sessionStorage.removeItem(KEY);
  sessionStorage.removeItem(KIND);
}

/** Whether this tab works through a portal link (limited to one source) rather than the admin token. */
export function isPortalSession(): boolean {
  return sessionStorage.getItem(KIND) === "portal" && getToken() !== undefined;
}

export interface PortalEnd {
  title: string;
  message: string;
}

/** Ends the tab's portal session (refused or closed): the token is forgotten, the reason kept. */
export function endPortal(end: PortalEnd): void {
  clearToken();
  sessionStorage.setItem(ENDED, JSON.stringify(end));
}

/** Why the tab's portal ended, while no other session started since. */
export function portalEnd(): PortalEnd | undefined {
  const text = sessionStorage.getItem(ENDED);
  if (text === null) return undefined;
  try {
    return JSON.parse(text) as PortalEnd;
  } catch {
    return undefined;
  }
}

/**
 * Takes a portal link's token out of the URL (`#portal=<token>`) into the session; true when the
 * URL carried one. It replaces whatever session the tab had.
 */
export function takePortalLink(): boolean {
  const fragment = new URLSearchParams(window.location.hash.replace(/^#/, ""));
  const token = fragment.get(PORTAL_FRAGMENT_KEY);
  if (!token) return false;
  sessionStorage.setItem(KEY, token);
  sessionStorage.setItem(KIND, "portal");
  sessionStorage.removeItem(ENDED);
  // Out of the address bar and the history: a shoulder, a screenshot or Back does not show it.
  history.replaceState(null, "", window.location.pathname + window.location.search);
  return true;
}
