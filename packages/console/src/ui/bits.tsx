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

/** A secret shown once with a copy button. */
export function ShowOnce({ label, value }: { label: string; value: string }) {
  return (
    <div class="notice notice-ok show-once">
      <p>
        <strong>{label}</strong> — shown once; copy it now.
      </p>
      <code class="secret" data-testid="shown-once">
        {value}
      </code>{" "}
      <CopyButton value={value} />
    </div>
  );
}

/** Copies `value`: to the clipboard when allowed, else the <code> beside the button is selected. */
export function CopyButton({ value }: { value: string }) {
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
    <button type="button" class="secondary small" onClick={copy}>
      {copied ? "Copied" : "Copy"}
    </button>
  );
}
