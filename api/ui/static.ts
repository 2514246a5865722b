// The web console's scripts and styles: htmx and xterm.js from their npm packages (installed by
// `npm ci`, nothing fetched at run time), and the console's own script and style from ./static/.
// A fixed list: nothing else under node_modules or the repository is reachable through this route.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { Hono } from "hono";
import { packageRoot } from "../../runtime/package-root.ts";

const require = createRequire(import.meta.url);
const own = (name: string) => join(packageRoot(), "api", "ui", "static", name);

const assets: Record<string, { file: () => string; type: string }> = {
  "htmx.min.js": { file: () => require.resolve("htmx.org/dist/htmx.min.js"), type: "text/javascript" },
  "xterm.js": { file: () => require.resolve("@xterm/xterm/lib/xterm.js"), type: "text/javascript" },
  "xterm.css": { file: () => require.resolve("@xterm/xterm/css/xterm.css"), type: "text/css" },
  "addon-fit.js": { file: () => require.resolve("@xterm/addon-fit/lib/addon-fit.js"), type: "text/javascript" },
  "console.js": { file: () => own("console.js"), type: "text/javascript" },
  "logs.js": { file: () => own("logs.js"), type: "text/javascript" },
  "exec.js": { file: () => own("exec.js"), type: "text/javascript" },
  "console.css": { file: () => own("console.css"), type: "text/css" },
};

export function staticAssets(): Hono {
  const cache = new Map<string, Buffer>();
  const app = new Hono();
  app.get("/:name", (c) => {
    const name = c.req.param("name");
    const asset = Object.hasOwn(assets, name) ? assets[name] : undefined;
    if (asset === undefined) return c.text("not found", 404);
    let body = cache.get(name);
    if (body === undefined) {
      body = readFileSync(asset.file());
      cache.set(name, body);
    }
    return c.body(new Uint8Array(body), 200, { "Content-Type": `${asset.type}; charset=utf-8`, "Cache-Control": "public, max-age=300" });
  });
  return app;
}
