import { CopyButton } from "./bits.js";

/**
 * The `whpk_` keys an Ed25519-signed destination's receivers verify with (not secret, so always
 * shown): the current key first, then the previous one while a rotation's overlap lasts.
 */
export function PublicKeys({ keys }: { keys: readonly string[] }) {
  if (keys.length === 0) return null;
  return (
    <div class="notice notice-info" data-testid="public-keys">
      <p>
        <strong>Public keys</strong> — receivers verify the <code>v1a</code> signatures with{" "}
        {keys.length === 1 ? "this key" : "these keys: both sign until the overlap ends, trust both"}.
      </p>
      {keys.map((k, i) => (
        <p key={k}>
          <code class="secret" data-testid="public-key">
            {k}
          </code>{" "}
          {i > 0 ? <span class="muted">(previous) </span> : null}
          <CopyButton value={k} />
        </p>
      ))}
    </div>
  );
}
