/** True when the text holds a C0 control character (U+0000..U+001F) or DEL. */
export function hasControlChar(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return true;
  }
  return false;
}

/** True when the text holds whitespace or a control character. */
export function hasSpaceOrControl(text: string): boolean {
  return hasControlChar(text) || /\s/.test(text);
}

/** True when every character may appear in an HTTP header value: tab, visible ASCII, space, obs-text. */
export function isHeaderValueText(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c !== 0x09 && (c < 0x20 || c === 0x7f || c > 0xff)) return false;
  }
  return true;
}

/** A UTF-16 unit of a surrogate pair missing its other half (JSON text may carry one). */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** True when the text holds half a surrogate pair: it has no UTF-8, so percent-encoding refuses it. */
export function hasLoneSurrogate(text: string): boolean {
  LONE_SURROGATE.lastIndex = 0;
  return LONE_SURROGATE.test(text);
}

/** The text with each lone surrogate as U+FFFD, as a UTF-8 encoder writes it. */
export function withoutLoneSurrogates(text: string): string {
  return text.replace(LONE_SURROGATE, "\ufffd");
}

/** True when the text holds CR, LF or NUL. */
export function hasLineBreakOrNul(text: string): boolean {
  return text.includes("\r") || text.includes("\n") || text.includes("\0");
}

/** Standard base64 (RFC 4648 section 4) with its padding, as the Standard Webhooks key formats use. */
export const STANDARD_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
