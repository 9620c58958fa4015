/**
 * `{{ expression }}` placeholders in a destination's URLs (path and query) and header values
 * (issue 27). Parsed here, one rule for the admin API, the CLI and the renderer (core's webhook
 * module evaluates the expressions). No escaping: a literal `{{` cannot be written, which no URL or
 * header value needs.
 */

export const MAX_PLACEHOLDER_CHARS = 512;
export const MAX_PLACEHOLDERS = 10;

export type TemplatePart = { text: string } | { expression: string; at: number };

/** The parts of a template, or what is wrong with it (with the 1-based character position). */
export function parseTemplate(template: string): TemplatePart[] | string {
  const parts: TemplatePart[] = [];
  let rest = 0;
  while (rest < template.length) {
    const open = template.indexOf("{{", rest);
    if (open < 0) break;
    const close = template.indexOf("}}", open + 2);
    if (close < 0) return `position ${open + 1}: "{{" is not closed by "}}"`;
    const expression = template.slice(open + 2, close).trim();
    if (expression === "") return `position ${open + 1}: "{{ }}" holds no expression`;
    if (expression.length > MAX_PLACEHOLDER_CHARS) {
      return `position ${open + 1}: a placeholder is at most ${MAX_PLACEHOLDER_CHARS} characters`;
    }
    if (open > rest) parts.push({ text: template.slice(rest, open) });
    parts.push({ expression, at: open + 1 });
    rest = close + 2;
  }
  if (rest < template.length) parts.push({ text: template.slice(rest) });
  if (parts.filter((p) => "expression" in p).length > MAX_PLACEHOLDERS) {
    return `at most ${MAX_PLACEHOLDERS} placeholders`;
  }
  return parts;
}

/** Whether the text holds a placeholder (the renderer's fast path skips the rest). */
export function isTemplate(text: string): boolean {
  return text.includes("{{");
}

/** The template with every placeholder replaced by `value`: what a URL check reads. */
export function fillTemplate(parts: readonly TemplatePart[], value: string): string {
  return parts.map((p) => ("text" in p ? p.text : value)).join("");
}

/**
 * Where a URL's path (or query) starts: placeholders are allowed from there on only, so that the
 * scheme, host and port, which the SSRF guard and TLS depend on, are fixed when applied.
 */
export function urlPathStart(url: string): number {
  const scheme = url.indexOf("://");
  if (scheme < 0) return 0;
  const after = url.slice(scheme + 3).search(/[/?]/);
  return after < 0 ? url.length : scheme + 3 + after;
}
