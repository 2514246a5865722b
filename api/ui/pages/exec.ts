// The exec terminal (docs/web-console.md, "Exec"): xterm.js in the page, connected straight to
// GET /api/podgroups/exec over a WebSocket. The browser sends the session cookie with the upgrade;
// the gate takes it there only from a page of this origin, and the exec API checks the exec
// permission and writes the audit line, as for the CLI. The page is offered only to those who may exec.
import { Hono } from "hono";
import { html } from "hono/html";
import { may } from "../../auth/index.ts";
import type { PodGroupWithSpec } from "../../resources/podgroup.ts";
import { qs, ui, type UiEnv } from "../context.ts";
import { errorBox, page } from "../layout.ts";

export function execPages(): Hono<UiEnv> {
  const app = new Hono<UiEnv>();
  app.get("/ui/podgroups/:name/exec", async (c) => {
    const { viewer, json } = ui(c);
    const name = c.req.param("name");
    const res = await json<PodGroupWithSpec>(`/api/podgroups${qs({ name })}`);
    if (!res.ok) return c.html(page(`Exec in ${name}`, viewer, "podgroups", errorBox(res.error.message)), res.status === 404 ? 404 : 403);
    if (!may(viewer.who, "exec", res.value.spec.namespace)) {
      return c.html(page(`Exec in ${name}`, viewer, "podgroups", errorBox(`You may not exec into app ${res.value.spec.namespace}'s containers.`)), 403);
    }
    const instances = [...new Set((res.value.pods ?? []).map((p) => p.instanceNo))].sort((a, b) => a - b);
    const instance = c.req.query("instance") ?? String(instances[0] ?? 0);
    const command = (c.req.query("cmd") ?? "sh").trim() || "sh";
    const enc = encodeURIComponent(name);
    const socket = `/api/podgroups/exec${qs({ name, instance, tty: true, stdin: true })}&${command
      .split(/\s+/)
      .map((a) => `cmd=${encodeURIComponent(a)}`)
      .join("&")}`;
    const body = html`<p><a href="/ui/podgroups/${enc}">Back to ${name}</a></p>
<form method="get" action="/ui/podgroups/${enc}/exec" class="row">
<label>Instance <select name="instance">${instances.map((i) => html`<option value="${i}"${String(i) === instance ? " selected" : ""}>${i}</option>`)}</select></label>
<label>Command <input name="cmd" value="${command}" data-testid="exec-command"></label>
<button type="submit" class="quiet">Connect</button>
<span id="exec-state" class="hint" data-testid="exec-state">connecting</span>
</form>
<div id="terminal" class="terminal" data-socket="${socket}" data-testid="terminal"></div>`;
    return c.html(page(`Exec in ${name}`, viewer, "podgroups", body, { scripts: ["/ui/static/xterm.js", "/ui/static/addon-fit.js", "/ui/static/exec.js"], styles: ["/ui/static/xterm.css"] }));
  });
  return app;
}
