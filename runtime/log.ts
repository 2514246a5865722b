// Structured JSON logs (pino). Components take a Logger; tests pass silentLogger.
// Secrets never go into log fields: log keys, names and revisions, not values.
import { pino, type Logger as PinoLogger } from "pino";

export type Logger = PinoLogger;

export function createLogger(name: string, level = process.env.CAPSTAN_LOG_LEVEL ?? "info"): Logger {
  return pino({ name, level, base: { component: name } });
}

export const silentLogger: Logger = pino({ level: "silent" });
