import { Gauge, type Registry } from "prom-client";

/**
 * `hookpost_config_revision`: the configuration revision a service has applied. Every admin
 * write returns the revision it created; once every replica shows at least that, the change is
 * in effect everywhere. /readyz shows the same number as `configRevision`.
 */
export function registerConfigRevision(registry: Registry, revision: () => number): void {
  new Gauge({
    name: "hookpost_config_revision",
    help: "Configuration revision applied by this replica (admin writes return the revision they created)",
    registers: [registry],
    collect() {
      this.set(revision());
    },
  });
}
