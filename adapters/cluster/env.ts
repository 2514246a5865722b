// "Patch an environment list with a key and value" (docs/cluster.md, "Capabilities", patchEnv): a Docker env list is `KEY=value`
// entries (a bare `KEY` means "take it from the caller's environment" in the CLI). Patching
// replaces the key where it first appears, keeping the list's order (so a container created from
// the patched list differs from the original only in that value), and drops any later duplicate:
// with two entries for one key the engine keeps the last, which would silently undo the patch.

export function patchEnv(env: readonly string[], key: string, value: string): string[] {
  if (key === "" || key.includes("=") || key.includes("\0")) {
    throw new RangeError(`env key ${JSON.stringify(key)} must be non-empty and contain no "=" or NUL`);
  }
  const entry = `${key}=${value}`;
  const out: string[] = [];
  let placed = false;
  for (const e of env) {
    const eq = e.indexOf("=");
    const k = eq < 0 ? e : e.slice(0, eq);
    if (k !== key) {
      out.push(e);
    } else if (!placed) {
      out.push(entry);
      placed = true;
    }
  }
  if (!placed) out.push(entry);
  return out;
}
