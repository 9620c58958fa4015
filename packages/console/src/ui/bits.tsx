import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { useState } from "preact/hooks";
import { absolute, relative } from "../format.js";

export function Time({ ts }: { ts: Timestamp | undefined }) {
  if (!ts) return <span class="muted">—</span>;
  return <time title={absolute(ts)}>{relative(ts)}</time>;
}

/** A coloured label; `kind` picks the colour (ok, bad, warn, idle). */
export function Badge({ kind, children }: { kind: "ok" | "bad" | "warn" | "idle"; children: string }) {
  return <span class={`badge badge-${kind}`}>{children}</span>;
}

/** A secret shown once with a copy button (clipboard when allowed, else the text is selected). */
export function ShowOnce({ label, value }: { label: string; value: string }) {
  const [copied, setCopied] = useState(false);
  const copy = async (e: Event) => {
    const code = (e.currentTarget as HTMLElement).parentElement?.querySelector("code");
    try {
      await navigator.clipboard.writeText(value);
      setCopied(true);
    } catch {
      if (code) window.getSelection()?.selectAllChildren(code);
    }
  };
  return (
    <div class="notice notice-ok show-once">
      <p>
        <strong>{label}</strong> — shown once; copy it now.
      </p>
      <code class="secret" data-testid="shown-once">
        {value}
      </code>{" "}
      <button type="button" class="secondary small" onClick={copy}>
        {copied ? "Copied" : "Copy"}
      </button>
    </div>
  );
}
