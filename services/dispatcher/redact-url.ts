/** For logs: scheme, host and path only; user info and query strings may carry credentials. */
export function logUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return "<invalid url>";
  }
}

/** For dead-letter records (shown to operators, who see the configuration anyway): no password. */
export function maskUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return url;
  }
}
