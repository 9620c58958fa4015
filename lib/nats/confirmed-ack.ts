import { setTimeout as sleep } from "node:timers/promises";
import type { JsMsg } from "nats";
import type { Logger } from "../log/logger.js";
import { isTransient, jetStreamErrorText } from "./jetstream-errors.js";

/** How long an ack is resent before the message is left to come back after ack-wait. */
const CONFIRM_FOR_MS = 30_000;
const ATTEMPT_TIMEOUT_MS = 2_000;

/** A message whose ack() is confirmed by JetStream, and `confirmed` settles once it is (or gave up). */
export interface ConfirmingMsg {
  msg: JsMsg;
  confirmed(): Promise<void>;
}

/**
 * Wraps a message so that ack() waits for the consumer leader's confirmation and is sent
 * again when none comes: a plain ack sent while the consumer's leader dies is lost, and the
 * message would be delivered twice after ack-wait. Other methods pass through.
 */
export function confirmingAck(msg: JsMsg, logger: Logger): ConfirmingMsg {
  let pending: Promise<void> | undefined;
  const wrapped = new Proxy(msg, {
    get(target, prop) {
      if (prop === "ack") {
        return () => {
          pending ??= confirm(target, logger);
        };
      }
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
  return { msg: wrapped, confirmed: () => pending ?? Promise.resolve() };
}

async function confirm(msg: JsMsg, logger: Logger): Promise<void> {
  const giveUpAt = Date.now() + CONFIRM_FOR_MS;
  for (let attempt = 1; ; attempt++) {
    try {
      await msg.ackAck({ timeout: ATTEMPT_TIMEOUT_MS });
      return;
    } catch (err) {
      if (!isTransient(err) || Date.now() > giveUpAt) {
        logger.warn(
          { seq: msg.seq, err: jetStreamErrorText(err) },
          "ack not confirmed; the message may be delivered again",
        );
        return;
      }
      // ackAck() sends once per message: let it send again (nats 2.29 keeps this flag on the message).
      (msg as unknown as { didAck: boolean }).didAck = false;
      await sleep(Math.min(1000, 50 * 2 ** attempt));
    }
  }
}
