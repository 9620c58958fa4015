/**
 * The admin token lives in sessionStorage only: gone when the tab closes, never in a URL,
 * never logged.
 */
const KEY = "hookpost.adminToken";

export function getToken(): string | undefined {
  return sessionStorage.getItem(KEY) ?? undefined;
}

export function setToken(token: string): void {
  sessionStorage.setItem(KEY, token);
}

export function clearToken(): void {
  sessionStorage.removeItem(KEY);
}
