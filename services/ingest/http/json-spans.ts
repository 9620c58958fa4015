/**
 * The size in bytes, as received, of each element of the array under `key` in a top-level JSON
 * object (`{"batch": [ … ]}`), so the per-call limit is checked on the bytes that arrived rather
 * than on a re-serialisation. `bytes` must be valid JSON (parse it first). Returns undefined when
 * there is no such array. UTF-8 multi-byte sequences never contain ASCII bytes, so a byte scan
 * is safe.
 */
export function arrayElementSizes(bytes: Uint8Array, key: string): number[] | undefined {
  const n = bytes.length;
  let depth = 0;
  let keyStart = -1;
  let keyEnd = -1;
  let lastKey = "";
  let inArray = false;
  let sizes: number[] | undefined;
  let elementStart = -1;
  let lastByte = -1;
  const closeElement = () => {
    if (elementStart >= 0) sizes!.push(lastByte - elementStart + 1);
    elementStart = -1;
  };
  for (let i = 0; i < n; i++) {
    const c = bytes[i]!;
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) continue;
    if (inArray && depth === 2 && elementStart < 0 && c !== 0x2c && c !== 0x5d) elementStart = i;
    if (c === 0x22) {
      const start = i + 1;
      for (i++; i < n && bytes[i] !== 0x22; i++) if (bytes[i] === 0x5c) i++;
      if (depth === 1) {
        keyStart = start;
        keyEnd = i;
      }
    } else if (c === 0x3a && depth === 1) {
      lastKey = Buffer.from(bytes.buffer, bytes.byteOffset + keyStart, keyEnd - keyStart).toString("utf8");
    } else if (c === 0x7b || c === 0x5b) {
      if (depth === 1 && c === 0x5b && lastKey === key) {
        inArray = true;
        sizes = [];
      }
      depth++;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
      if (inArray && depth === 1) {
        closeElement();
        inArray = false;
      }
    } else if (c === 0x2c && inArray && depth === 2) {
      closeElement();
    }
    lastByte = i;
  }
  return sizes;
}
