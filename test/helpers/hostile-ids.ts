/**
 * Message ids of issue 10 findings 1 and 2: characters an HTTP header cannot carry (delivery
 * would fail forever), or that a transport trims or strips (the id delivered or deduplicated
 * would differ from the one answered). The contract refuses each of them.
 */
export const HOSTILE_MESSAGE_IDS: readonly string[] = [
  "日本-1",
  "é",
  "😀",
  "cli-1 ",
  " X",
  "cli-1\u00a0",
  "cli-1\u2003",
  "\ufeffcli-1",
  "a\u2028b",
  "a\r\nb",
];
