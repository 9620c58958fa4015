import "@picocss/pico/css/pico.min.css";
import "./style.css";
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { onUnauthenticated } from "./api.js";
import { AuditPage } from "./pages/audit.js";
import { DeadLettersPage } from "./pages/dead-letters.js";
import { DeletionPage } from "./pages/deletion.js";
import { DestinationPage, NewDestination } from "./pages/destination.js";
import { MessagePage } from "./pages/message.js";
import { Overview } from "./pages/overview.js";
import { SearchPage } from "./pages/search.js";
import { SignIn } from "./pages/sign-in.js";
import { SourcesPage } from "./pages/sources.js";
import { navigate, onLinkClick, useRoute } from "./router.js";
import { clearToken, getToken } from "./session.js";

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
  useEffect(
    () =>
      onUnauthenticated(() => {
        clearToken();
        setReason("The admin token was refused: sign in again.");
        navigate("/sign-in", true);
      }),
    [],
  );
  const signedIn = getToken() !== undefined;
  useEffect(() => {
    if (signedIn && path === "/sign-in") navigate("/", true);
  }, [signedIn, path]);
  if (!signedIn) return <SignIn reason={reason} />;
  if (path === "/sign-in") return null;
  const signOut = () => {
    clearToken();
    setReason(undefined);
    navigate("/sign-in");
  };
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
            {NAV.map(([p, label]) => (
              <li key={p}>
                <a href={`/console${p === "/" ? "/" : p}`} aria-current={active(p) ? "page" : undefined}>
                  {label}
                </a>
              </li>
            ))}
            <li>
              <button type="button" class="outline secondary small" onClick={signOut}>
                Sign out
              </button>
            </li>
          </ul>
        </nav>
      </header>
      <main class="container">
        <Page path={path} query={query} />
      </main>
    </>
  );
}

document.addEventListener("click", onLinkClick);
render(<App />, document.getElementById("app")!);
