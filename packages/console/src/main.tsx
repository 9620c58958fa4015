import "@picocss/pico/css/pico.min.css";
import "./style.css";
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { apiError, onUnauthenticated } from "./api.js";
import { AuditPage } from "./pages/audit.js";
import { DeadLettersPage } from "./pages/dead-letters.js";
import { DeletionPage } from "./pages/deletion.js";
import { DestinationPage, NewDestination } from "./pages/destination.js";
import { MessagePage } from "./pages/message.js";
import { Overview } from "./pages/overview.js";
import { SearchPage } from "./pages/search.js";
import { SignIn } from "./pages/sign-in.js";
import { SourcesPage } from "./pages/sources.js";
import {
  forgetPortal,
  loadPortal,
  OPERATOR_ROUTES,
  type Portal,
  PortalBanner,
  PortalEnded,
  portal,
} from "./portal.js";
import { navigate, onLinkClick, useRoute } from "./router.js";
import {
  clearToken,
  endPortal,
  getToken,
  isPortalSession,
  type PortalEnd,
  portalEnd,
  takePortalLink,
} from "./session.js";

// Before anything renders: a portal link's token leaves the URL for the session.
takePortalLink();

const NAV: Array<[string, string]> = [
  ["/", "Overview"],
  ["/dead-letters", "Dead letters"],
  ["/messages", "Messages"],
  ["/search", "Search"],
  ["/sources", "Sources"],
  ["/audit", "Audit log"],
  ["/deletions", "Deletions"],
];

function Page({ path, query }: { path: string; query: URLSearchParams }) {
  const seg = path.split("/").filter(Boolean).map(decodeURIComponent);
  if (seg.length === 0) return <Overview />;
  if (portal() && OPERATOR_ROUTES.includes(seg[0] ?? "")) {
    return (
      <p class="notice notice-info">
        This page is not part of this portal. <a href="/console/">Back to the overview</a>.
      </p>
    );
  }
  if (seg[0] === "destinations" && seg[1] === "new") return <NewDestination />;
  if (seg[0] === "destinations" && seg[1]) return <DestinationPage id={seg[1]} key={seg[1]} />;
  if (seg[0] === "messages") return <MessagePage id={seg[1] ?? ""} source={query.get("source") ?? ""} />;
  if (seg[0] === "dead-letters") return <DeadLettersPage destination={query.get("destination") ?? ""} />;
  if (seg[0] === "search") return <SearchPage query={query} />;
  if (seg[0] === "sources") return <SourcesPage />;
  if (seg[0] === "deletions") return <DeletionPage id={seg[1] ?? ""} />;
  if (seg[0] === "audit")
    return <AuditPage resource={query.get("resource") ?? ""} key={query.get("resource") ?? ""} />;
  return (
    <p class="notice notice-info">
      No page here. <a href="/console/">Back to the overview</a>.
    </p>
  );
}

function App() {
  const { path, query } = useRoute();
  const [reason, setReason] = useState<string | undefined>(undefined);
  // A portal link the server refused, or the portal closed: what to say instead of the pages.
  const [ended, setEnded] = useState<PortalEnd | undefined>(portalEnd());
  const end = (e: PortalEnd) => {
    endPortal(e);
    forgetPortal();
    setEnded(e);
  };
  const portalSession = isPortalSession();
  const [opened, setOpened] = useState<Portal | undefined>(portal());
  useEffect(
    () =>
      onUnauthenticated((error) => {
        if (isPortalSession()) {
          end({ title: "This link no longer works", message: error.message });
          return;
        }
        clearToken();
        setReason("The admin token was refused: sign in again.");
        navigate("/sign-in", true);
      }),
    [],
  );
  useEffect(() => {
    if (!portalSession || opened) return;
    loadPortal().then(setOpened, (err: unknown) =>
      end({ title: "This link no longer works", message: apiError(err).message }),
    );
  }, [portalSession, opened]);
  const signedIn = getToken() !== undefined;
  useEffect(() => {
    if (signedIn && path === "/sign-in") navigate("/", true);
  }, [signedIn, path]);
  if (ended) return <PortalEnded title={ended.title} message={ended.message} />;
  if (!signedIn) return <SignIn reason={reason} />;
  if (path === "/sign-in") return null;
  if (portalSession && !opened) {
    return (
      <main class="container">
        <p aria-busy="true">Opening the portal…</p>
      </main>
    );
  }
  const signOut = () => {
    if (opened) {
      end({ title: "Portal closed", message: "Open the link again to come back (while it works)." });
      return;
    }
    clearToken();
    setReason(undefined);
    navigate("/sign-in");
  };
  const nav = opened ? NAV.filter(([p]) => !OPERATOR_ROUTES.includes(p.slice(1))) : NAV;
  const active = (p: string) =>
    p === "/" ? path === "/" || path.startsWith("/destinations") : path.startsWith(p);
  return (
    <>
      <header class="top container">
        <nav>
          <ul>
            <li>
              <a href="/console/" class="brand">
                <strong>Hookpost</strong>
              </a>
            </li>
          </ul>
          <ul class="nav-links">
            {nav.map(([p, label]) => (
              <li key={p}>
                <a href={`/console${p === "/" ? "/" : p}`} aria-current={active(p) ? "page" : undefined}>
                  {label}
                </a>
              </li>
            ))}
            <li>
              <button type="button" class="outline secondary small" onClick={signOut}>
                {opened ? "Close" : "Sign out"}
              </button>
            </li>
          </ul>
        </nav>
      </header>
      <main class="container">
        {opened ? <PortalBanner p={opened} /> : null}
        <Page path={path} query={query} />
      </main>
    </>
  );
}

document.addEventListener("click", onLinkClick);
render(<App />, document.getElementById("app")!);
