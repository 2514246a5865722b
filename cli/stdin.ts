// Secrets typed or piped by the user (a login token, an unseal key, the root token): from standard
// input, so they never appear in the process list or the shell history the way a command-line
// argument does.
import { createInterface } from "node:readline/promises";
import { Writable } from "node:stream";

/**
 * One line typed on a terminal (after `prompt` on stderr, without echoing what is typed), or the
 * whole of piped input; trimmed either way.
 */
export async function readSecretInput(prompt: string, stdin: NodeJS.ReadStream = process.stdin): Promise<string> {
  if (stdin.isTTY) {
    process.stderr.write(prompt);
    // readline echoes the line to its output; a sink that drops it keeps the secret off the screen.
    const silent = new Writable({ write: (_chunk, _encoding, done) => done() });
    const rl = createInterface({ input: stdin, output: silent, terminal: true });
    try {
      return (await rl.question("")).trim();
    } finally {
      rl.close();
      process.stderr.write("\n");
    }
  }
  const chunks: Buffer[] = [];
  for await (const chunk of stdin) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : (chunk as Buffer));
  return Buffer.concat(chunks).toString("utf8").trim();
}
