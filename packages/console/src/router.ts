import { useEffect, useState } from "preact/hooks";

/** Client-side routes under /console/ (the server answers index.html for any of them). */
export const BASE = "/console";

const listeners = new Set<() => void>();

export function navigate(path: string, replace = false): void {
  const url = `${BASE}${path}`;
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  for (const l of listeners) l();
  window.scrollTo(0, 0);
}

window.addEventListener("popstate", () => {
  for (const l of listeners) l();
});

/** The path after /console (e.g. `/destinations/d1`), and the query. */
export function currentRoute(): { path: string; query: URLSearchParams } {
  const p = window.location.pathname;
  const path = p.startsWith(BASE) ? p.slice(BASE.length) || "/" : "/";
  return { path, query: new URLSearchParams(window.location.search) };
}

export function useRoute(): { path: string; query: URLSearchParams } {
  const [, force] = useState(0);
  useEffect(() => {
    const l = () => force((n) => n + 1);
    listeners.add(l);
    return () => listeners.delete(l);
  }, []);
  return currentRoute();
}

/** Left clicks on in-app links navigate without a reload. */
export function onLinkClick(e: MouseEvent): void {
  const a = (e.target as Element).closest?.("a");
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey) return;
  const href = a.getAttribute("href");
  if (!href?.startsWith(`${BASE}/`) || a.target) return;
  e.preventDefault();
  navigate(href.slice(BASE.length));
}
