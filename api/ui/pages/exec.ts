// The exec terminal (docs/web-console.md, "Exec"): xterm.js in the page, connected straight to
// GET /api/podgroups/exec over a WebSocket. The browser sends the session cookie with the upgrade;
// the gate takes it there only from a page of this origin, and the exec API checks the exec
// permission and writes the audit line, as for the CLI. The page is offered only to those who may exec.
import { Hono } from "hono";
import { html } from "hono/html";
import { may } from "../../auth/index.ts";
import { firstInstanceNo, type PodGroupWithSpec } from "../../resources/podgroup.ts";
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
    const instance = c.req.query("instance") ?? String(instances[0] ?? firstInstanceNo);
    const enc = encodeURIComponent(name);
    // Nothing runs until the user presses Connect, and the command is typed on the page, never
    // taken from the URL: a link to this page cannot run anything. The socket carries the
    // session's CSRF token (the gate takes the session cookie only with it).
    const body = html`<p><a href="/ui/podgroups/${enc}">Back to ${name}</a></p>
<form id="exec-form" class="row">
<label>Instance <select name="instance" data-testid="exec-instance">${instances.map((i) => html`<option value="${i}"${String(i) === instance ? " selected" : ""}>${i}</option>`)}</select></label>
<label>Command <input name="cmd" value="sh" autocomplete="off" data-testid="exec-command"></label>
<button type="submit" data-testid="exec-connect">Connect</button>
<span id="exec-state" class="hint" data-testid="exec-state">not connected</span>
</form>
<div id="terminal" class="terminal" data-name="${name}" data-csrf="${viewer.csrf}" data-testid="terminal"></div>`;
    return c.html(page(`Exec in ${name}`, viewer, "podgroups", body, { scripts: ["/ui/static/xterm.js", "/ui/static/addon-fit.js", "/ui/static/exec.js"], styles: ["/ui/static/xterm.css"] }));
  });
  return app;
}
