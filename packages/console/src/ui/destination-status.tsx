import type { Destination } from "@hookpost/contract/gen/hookpost/v1/admin_pb";
import { admin, call } from "../api.js";
import { destinationStatus } from "../status.js";
import { Badge } from "./bits.js";
import { ErrorNotice } from "./notice.js";
import { useApi } from "./use-api.js";

const REFRESH_MS = 5_000;
/** The newest attempts the status is checked against. */
const RECENT = 20;

/**
 * A destination's status on its page: from its health figures and its newest attempts, so it is
 * never more hopeful than they are (every attempt failing reads "Failing", not "Delivering").
 */
export function DestinationStatus({ dest }: { dest: Destination }) {
  const id = dest.id;
  const loaded = useApi(
    async () => {
      // Health is optional (an older server): the attempts alone still decide.
      const [health, attempts] = await Promise.all([
        call(() => admin.listDestinationHealth({ destinationId: id })),
        admin.listAttempts({ destinationId: id, pageSize: RECENT }),
      ]);
      return { health: health.ok ? health.value.destinations[0] : undefined, recent: attempts.attempts };
    },
    [id],
    REFRESH_MS,
  );
  const enabled = dest.enabled !== false;
  // Paused says so at once; an enabled one waits for its attempts before saying anything.
  if (!loaded.data && enabled) {
    return (
      <div class="status-panel" data-testid="delivery-state" data-status="loading">
        {loaded.error ? (
          <ErrorNotice error={loaded.error} what="Its status could not be read" />
        ) : (
          <p aria-busy="true">Checking its last attempts…</p>
        )}
      </div>
    );
  }
  const status = destinationStatus({
    enabled,
    disabledReason: dest.disabledReason,
    health: loaded.data?.health,
    recent: loaded.data?.recent,
  });
  return (
    <div class={`status-panel status-${status.kind}`} data-testid="delivery-state" data-status={status.kind}>
      <p class="headline">
        <Badge kind={status.badge}>{status.label}</Badge> {status.headline}
      </p>
      <WhyList why={status.why} />
      <ErrorNotice error={loaded.error} what="Its status may be out of date" />
    </div>
  );
}

/** The reasons behind a status, one a line. */
export function WhyList({ why }: { why: string[] }) {
  if (why.length === 0) return null;
  return (
    <ul class="why">
      {why.map((w) => (
        <li key={w}>{w}</li>
      ))}
    </ul>
  );
}
