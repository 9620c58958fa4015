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

/** True when the text holds CR, LF or NUL. */
export function hasLineBreakOrNul(text: string): boolean {
  return text.includes("\r") || text.includes("\n") || text.includes("\0");
}

/** Standard base64 (RFC 4648 section 4) with its padding, as the Standard Webhooks key formats use. */
export const STANDARD_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
