/**
 * Preloaded into a service process (`node --import`) by clock tests: each SIGUSR2 sets the
 * process's wall clock (Date.now) an hour back, as an NTP step or a virtual machine restored from
 * a snapshot does to a running service. The monotonic clock (performance.now) and timers go on
 * as before. Logs `clock set back` (a JSON line) once in effect.
 */
const HOUR = 3_600_000;
const realNow = Date.now;
let behindMs = 0;
Date.now = () => realNow.call(Date) - behindMs;
process.on("SIGUSR2", () => {
  behindMs += HOUR;
  process.stdout.write(`${JSON.stringify({ msg: "clock set back", behindMs })}\n`);
});
