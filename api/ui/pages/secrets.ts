// An app's secret files (docs/web-console.md, "Pages"; docs/secrets.md): the paths of each proc,
// contents hidden until revealed, add, edit and delete. The secrets service decides who may read
// and write; a page never holds a secret's content unless its viewer asked to see it.
import { createHash } from "node:crypto";
import { Hono } from "hono";
import { html } from "hono/html";
import { field, qs, ui, type UiEnv, type UiRequest } from "../context.ts";
import { csrfInput, errorBox, notice, page, type Html, type Viewer } from "../layout.ts";
import { apiErrorBox } from "./podgroups.ts";

interface SecretView {
  proc: string;
  path: string;
  content: string;
  owner: string;
  group: string;
  mode: string;
}

const doneMessages: Record<string, string> = { saved: "The secret file was saved; Secret-sync installs it in the proc's containers.", deleted: "The secret file was deleted." };

export function secretPages(): Hono<UiEnv> {
  const app = new Hono<UiEnv>();

  const secretsPage = async (r: UiRequest, appName: string, extra: Html | "" = "", form?: Partial<SecretView>) => {
    const { viewer, json } = r;
    const res = await json<SecretView[]>(`/v2/secrets${qs({ app: appName })}`);
    const base = `/ui/apps/${encodeURIComponent(appName)}/secrets`;
    const list = res.ok
      ? res.value.length === 0
        ? html`<p class="hint">No secret files.</p>`
        : html`<table data-testid="secrets"><thead><tr><th>Proc</th><th>Path</th><th>Owner</th><th>Group</th><th>Mode</th><th>Content</th><th></th></tr></thead><tbody>
${res.value.map(
  (s) => html`<tr><td>${s.proc}</td><td><code data-testid="secret-path">${s.path}</code></td><td>${s.owner}</td><td>${s.group}</td><td>${s.mode}</td>
<td><div id="secret-${idOf(s)}"><button type="button" class="quiet" hx-get="${base}/reveal${qs({ proc: s.proc, path: s.path })}" hx-target="#secret-${idOf(s)}" hx-swap="innerHTML">Reveal</button></div></td>
<td><form method="post" action="${base}/delete" class="inline">${csrfInput(viewer)}<input type="hidden" name="proc" value="${s.proc}"><input type="hidden" name="path" value="${s.path}"><button type="submit" class="danger">Delete</button></form></td></tr>`,
)}
</tbody></table>`
      : apiErrorBox(res.error);
    return page(`Secrets of ${appName}`, viewer, "apps", html`${extra}${list}<h2>Add or replace a secret file</h2>${editForm(viewer, base, appName, form)}`);
  };

  app.get("/ui/apps/:app/secrets", async (c) => {
    const code = c.req.query("done") ?? "";
    return c.html(await secretsPage(ui(c), c.req.param("app"), Object.hasOwn(doneMessages, code) ? notice(doneMessages[code]!) : ""));
  });

  // The content is fetched only when asked for, and shown with a form to change it.
  app.get("/ui/apps/:app/secrets/reveal", async (c) => {
    const r = ui(c);
    const appName = c.req.param("app");
    const res = await r.json<SecretView[]>(`/v2/secrets${qs({ app: appName, proc: c.req.query("proc"), path: c.req.query("path") })}`);
    if (!res.ok) return c.html(errorBox(res.error.message));
    const s = res.value[0];
    if (s === undefined) return c.html(errorBox("That secret file no longer exists."));
    return c.html(html`<pre class="secret-content" data-testid="secret-content">${s.content}</pre>${editForm(r.viewer, `/ui/apps/${encodeURIComponent(appName)}/secrets`, appName, s)}`);
  });

  // A browser sends a textarea's line ends as CRLF (HTML's form encoding); the file gets what the
  // user typed, LF line ends (docs/web-console.md, "Secrets").
  app.post("/ui/apps/:app/secrets", async (c) => {
    const r = ui(c);
    const appName = c.req.param("app");
    const form = await c.req.parseBody();
    const s = { proc: field(form, "proc").trim(), path: field(form, "path").trim(), content: field(form, "content").replace(/\r\n/g, "\n"), owner: field(form, "owner").trim() || "root", group: field(form, "group").trim() || "root", mode: field(form, "mode").trim() || "400" };
    const res = await r.json(`/v2/secrets${qs({ app: appName, proc: s.proc, path: s.path })}`, { method: "PUT", body: { content: s.content, owner: s.owner, group: s.group, mode: s.mode } });
    if (!res.ok) return c.html(await secretsPage(r, appName, apiErrorBox(res.error), s), res.status as 400);
    return c.redirect(`/ui/apps/${encodeURIComponent(appName)}/secrets?done=saved`, 303);
  });

  app.post("/ui/apps/:app/secrets/delete", async (c) => {
    const r = ui(c);
    const appName = c.req.param("app");
    const form = await c.req.parseBody();
    const res = await r.json(`/v2/secrets${qs({ app: appName, proc: field(form, "proc"), path: field(form, "path") })}`, { method: "DELETE" });
    if (!res.ok) return c.html(await secretsPage(r, appName, apiErrorBox(res.error)), res.status as 400);
    return c.redirect(`/ui/apps/${encodeURIComponent(appName)}/secrets?done=deleted`, 303);
  });

  return app;
}

/** The add/edit form, with the secrets service's defaults (owner and group root, mode 400). */
function editForm(viewer: Viewer, base: string, appName: string, s: Partial<SecretView> = {}): Html {
  return html`<form method="post" action="${base}" class="secret-form">${csrfInput(viewer)}
<div class="row">
<label>Proc <input name="proc" required value="${s.proc ?? `${appName}.web.web`}" data-testid="secret-proc"></label>
<label>Path (relative to /platform/app, or absolute) <input name="path" required size="40" value="${s.path ?? ""}" data-testid="secret-path-input"></label>
<label>Owner <input name="owner" size="6" value="${s.owner ?? "root"}"></label>
<label>Group <input name="group" size="6" value="${s.group ?? "root"}"></label>
<label>Mode <input name="mode" size="5" value="${s.mode ?? "400"}"></label>
</div>
<label>Content <textarea class="code" name="content" rows="6" spellcheck="false" data-testid="secret-content-input">${s.content ?? ""}</textarea></label>
<p><button type="submit" data-testid="save-secret">Save</button></p></form>`;
}

/** An element id for a secret's row: stable, and only [a-z0-9-]. */
function idOf(s: { proc: string; path: string }): string {
  return createHash("sha256").update(`${s.proc}\0${s.path}`).digest("hex").slice(0, 20);
}
