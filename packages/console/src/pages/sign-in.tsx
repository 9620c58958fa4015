import { useState } from "preact/hooks";
import { type ApiError, admin, call } from "../api.js";
import { navigate } from "../router.js";
import { clearToken, setToken } from "../session.js";

/** Checks the token with one cheap call before keeping it for the session. */
export function SignIn({ reason }: { reason: string | undefined }) {
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const token = String(new FormData(e.currentTarget as HTMLFormElement).get("token") ?? "").trim();
    if (token === "") {
      setError({ code: 3, message: "Enter the admin token.", violations: [] });
      return;
    }
    setBusy(true);
    setToken(token);
    const r = await call(() => admin.listSources({}));
    setBusy(false);
    if (r.ok) {
      navigate("/", true);
      return;
    }
    clearToken();
    setError(r.error);
  };
  return (
    <main class="container sign-in">
      <article>
        <h1>Hookpost</h1>
        {reason ? <p class="notice notice-info">{reason}</p> : null}
        <form onSubmit={submit} method="post" action="">
          <label>
            Admin token
            <input
              name="token"
              type="password"
              autoComplete="current-password"
              aria-invalid={error ? "true" : undefined}
              required
            />
            {error ? (
              <small class="field-error" role="alert">
                {error.message}
              </small>
            ) : null}
          </label>
          <button type="submit" aria-busy={busy} disabled={busy}>
            Sign in
          </button>
        </form>
        <p class="muted">
          The token is the ingest's <code>ADMIN_TOKEN</code> (<code>npm start</code> prints it). It is kept in
          this tab only, until you sign out or close it.
        </p>
      </article>
    </main>
  );
}
