// Secrets typed or piped by the user (a login token, an unseal key): from standard input, so they
// never appear in the process list or the shell history the way a command-line argument does.
import { createInterface } from "node:readline/promises";

/** One line from a terminal (after a prompt on stderr), or the whole of piped input, trimmed. */
export async function readSecretInput(prompt: string, stdin: NodeJS.ReadStream = process.stdin): Promise<string> {
  if (stdin.isTTY) {
    const rl = createInterface({ input: stdin, output: process.stderr, terminal: true });
    try {
      return (await rl.question(prompt)).trim();
    } finally {
      rl.close();
    }
  }
  const chunks: Buffer[] = [];
  for await (const chunk of stdin) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : (chunk as Buffer));
  return Buffer.concat(chunks).toString("utf8").trim();
}
