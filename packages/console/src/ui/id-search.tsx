import { navigate } from "../router.js";

/**
 * A search by id that opens the id's own page (`<path>/<id>`), so that it can be linked and
 * reloaded; the field shows the id of the page open now.
 */
export function IdSearch(p: { path: string; name: string; label: string; button: string; id: string }) {
  const open = (e: Event) => {
    e.preventDefault();
    const v = String(new FormData(e.currentTarget as HTMLFormElement).get(p.name) ?? "").trim();
    if (v) navigate(`${p.path}/${encodeURIComponent(v)}`);
  };
  return (
    <search>
      <form onSubmit={open} class="search">
        <input name={p.name} placeholder={p.label} defaultValue={p.id} key={p.id} aria-label={p.label} />
        <button type="submit">{p.button}</button>
      </form>
    </search>
  );
}
