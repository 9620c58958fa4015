/**
 * For logs: scheme, host and port only. User info and query strings may carry credentials, and
 * so may the path: a Slack, Discord or Zapier hook's token is a path segment. The attempt log
 * (access-controlled, erased with its user) keeps the whole URL; the destination id says which.
 */
export function logUrl(url: string): string {
  try {
    return new URL(url).origin;
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
