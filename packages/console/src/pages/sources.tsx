import { useState } from "preact/hooks";
import { type ApiError, admin, allSources, call } from "../api.js";
import { ShowOnce, Time } from "../ui/bits.js";
import { ErrorNotice, FieldError, FormError } from "../ui/notice.js";
import { useApi } from "../ui/use-api.js";

/**
 * /sources — list, create (write key shown once), rotate the key, delete. The web origins a
 * source accepts browsers from (allowed_origins) are shown; they are set with the CLI or the API.
 */
export function SourcesPage() {
  const sources = useApi(async () => ({ sources: await allSources() }), []);
  const [createError, setCreateError] = useState<ApiError | undefined>(undefined);
  const [actionError, setActionError] = useState<ApiError | undefined>(undefined);
  const [shown, setShown] = useState<{ label: string; key: string } | undefined>(undefined);
  const [confirm, setConfirm] = useState("");
  const [busy, setBusy] = useState(false);

  const create = async (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const f = new FormData(form);
    setBusy(true);
    const r = await call(() =>
      admin.createSource({ name: String(f.get("name") ?? ""), id: String(f.get("id") ?? "").trim() }),
    );
    setBusy(false);
    if (!r.ok) {
      setCreateError(r.error);
      return;
    }
    setCreateError(undefined);
    form.reset();
    setShown({ label: `Write key of "${r.value.source!.name}"`, key: r.value.writeKey });
    sources.reload();
  };
  const rotate = async (id: string) => {
    const r = await call(() => admin.rotateWriteKey({ id }));
    if (r.ok) {
      setShown({
        label: `New write key of "${r.value.source!.name}" (the old one stopped working)`,
        key: r.value.writeKey,
      });
      setActionError(undefined);
      sources.reload();
    } else setActionError(r.error);
  };
  const remove = async (id: string) => {
    const r = await call(() => admin.deleteSource({ id }));
    setConfirm("");
    if (r.ok) {
      setActionError(undefined);
      sources.reload();
    } else setActionError(r.error);
  };

  return (
    <section>
      <h2>Sources</h2>
      {shown ? <ShowOnce label={shown.label} value={shown.key} /> : null}
      <ErrorNotice error={sources.error} what="Sources could not be loaded" />
      <ErrorNotice error={actionError} />
      {sources.data ? (
        sources.data.sources.length === 0 ? (
          <p class="muted">No source yet: create one below. Services send calls with its write key.</p>
        ) : (
          <div class="table-scroll">
            <table data-testid="sources">
              <thead>
                <tr>
                  <th>Name</th>
                  <th>Id</th>
                  <th>Write key</th>
                  <th>Created</th>
                  <th title="allowed_origins: web pages whose browsers may send this source's calls">
                    Browsers from
                  </th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {sources.data.sources.map((s) => (
                  <tr key={s.id} data-source={s.id}>
                    <td>{s.name}</td>
                    <td>{s.id}</td>
                    <td>
                      <code>{s.writeKeyPrefix}…</code>
                    </td>
                    <td>
                      <Time ts={s.createTime} />
                    </td>
                    <td data-testid="allowed-origins">
                      {s.allowedOrigins.length === 0 ? (
                        <span class="muted">any web site</span>
                      ) : (
                        s.allowedOrigins.map((o) => (
                          <code key={o} class="origin">
                            {o}
                          </code>
                        ))
                      )}
                    </td>
                    <td class="row-actions">
                      <button type="button" class="secondary small" onClick={() => rotate(s.id)}>
                        Rotate key
                      </button>
                      {confirm === s.id ? (
                        <button type="button" class="danger small" onClick={() => remove(s.id)}>
                          Really delete
                        </button>
                      ) : (
                        <button type="button" class="outline danger small" onClick={() => setConfirm(s.id)}>
                          Delete
                        </button>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )
      ) : null}
      <article>
        <h3>New source</h3>
        <form onSubmit={create} noValidate data-testid="new-source">
          <FormError error={createError} fields={["name", "id"]} />
          <div class="grid">
            <label>
              Name
              <input name="name" autoComplete="off" />
              <FieldError error={createError} field="name" />
            </label>
            <label>
              Id <span class="muted">(optional)</span>
              <input name="id" autoComplete="off" />
              <FieldError error={createError} field="id" />
            </label>
          </div>
          <button type="submit" aria-busy={busy} disabled={busy}>
            Create source
          </button>
        </form>
      </article>
    </section>
  );
}
