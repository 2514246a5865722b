// Console pages (docs/web-console.md, "Pages"): apps and their maintainers, access tokens. The
// console API decides who may do what (apps and tokens are an admin's); a user sees the apps
// it maintains, each with a link to its secrets.
import { Hono } from "hono";
import { html } from "hono/html";
import { field, ui, type UiEnv, type UiRequest } from "../context.ts";
import { age, csrfInput, errorBox, notice, page, type Html } from "../layout.ts";
import { apiErrorBox } from "./podgroups.ts";

interface AppView {
  appname: string;
  maintainers: string[];
}
interface TokenView {
  id: string;
  user: string;
  role: string;
  createdAt: string;
  expiresAt?: string;
  apps?: string[];
  origin?: string;
}

export function adminPages(): Hono<UiEnv> {
  const app = new Hono<UiEnv>();

  const appsPage = async (r: UiRequest, extra: Html | "" = "") => {
    const { viewer, json } = r;
    const admin = viewer.who.role === "admin";
    let list: AppView[];
    if (admin) {
      const res = await json<AppView[]>("/api/v1/apps");
      if (!res.ok) return page("Apps", viewer, "apps", html`${extra}${apiErrorBox(res.error)}`);
      list = res.value;
    } else {
      list = [...viewer.who.apps].sort().map((a) => ({ appname: a, maintainers: [] }));
    }
    const sp = (s: string) => encodeURIComponent(s);
    return page(
      "Apps",
      viewer,
      "apps",
      html`${extra}
${list.length === 0 ? html`<p class="hint">No apps${admin ? "" : " list you as a maintainer"}.</p>` : ""}
<table data-testid="apps"><thead><tr><th>App</th>${admin ? html`<th>Maintainers</th>` : ""}<th>Secrets</th></tr></thead><tbody>
${list.map(
  (a) => html`<tr><td>${a.appname}</td>${
    admin
      ? html`<td><form method="post" action="/ui/apps/${sp(a.appname)}/maintainers" class="row">${csrfInput(viewer)}
<input name="maintainers" size="50" value="${a.maintainers.join(", ")}" aria-label="maintainers of ${a.appname}"><button type="submit" class="quiet">Save</button></form></td>`
      : ""
  }<td><a href="/ui/apps/${sp(a.appname)}/secrets">secrets</a></td></tr>`,
)}
</tbody></table>
${
  admin
    ? html`<h2>Register an app</h2><form method="post" action="/ui/apps" class="row">${csrfInput(viewer)}
<label>Name <input name="appname" required pattern="[a-z0-9]([a-z0-9-]*[a-z0-9])?" data-testid="appname"></label>
<label>Maintainers (e-mails, comma-separated) <input name="maintainers" size="50" data-testid="maintainers"></label>
<button type="submit">Register</button></form>`
    : ""
}`,
    );
  };

  app.get("/ui/apps", async (c) => c.html(await appsPage(ui(c), c.req.query("done") === "saved" ? notice("Saved.") : "")));
  app.post("/ui/apps", async (c) => {
    const r = ui(c);
    const form = await c.req.parseBody();
    const res = await r.json("/api/v1/apps", { method: "POST", body: { appname: field(form, "appname").trim(), maintainers: emails(field(form, "maintainers")) } });
    if (!res.ok) return c.html(await appsPage(r, apiErrorBox(res.error)), res.status as 400);
    return c.redirect("/ui/apps?done=saved", 303);
  });
  app.post("/ui/apps/:app/maintainers", async (c) => {
    const r = ui(c);
    const form = await c.req.parseBody();
    const res = await r.json(`/api/v1/apps/${encodeURIComponent(c.req.param("app"))}/maintainers`, { method: "PUT", body: { maintainers: emails(field(form, "maintainers")) } });
    if (!res.ok) return c.html(await appsPage(r, apiErrorBox(res.error)), res.status as 400);
    return c.redirect("/ui/apps?done=saved", 303);
  });

  const tokensPage = async (r: UiRequest, extra: Html | "" = "") => {
    const { viewer, json } = r;
    const res = await json<TokenView[]>("/api/v1/tokens");
    if (!res.ok) return page("Access tokens", viewer, "tokens", html`${extra}${apiErrorBox(res.error)}`);
    return page(
      "Access tokens",
      viewer,
      "tokens",
      html`${extra}
<table data-testid="tokens"><thead><tr><th>Id</th><th>User</th><th>Role</th><th>Apps</th><th>Created</th><th>Expires</th><th>Origin</th><th></th></tr></thead><tbody>
${res.value.map(
  (t) => html`<tr><td><code>${t.id}</code></td><td>${t.user}</td><td>${t.role}</td><td>${(t.apps ?? []).join(", ")}</td><td>${age(t.createdAt)} ago</td><td>${t.expiresAt ?? "never"}</td><td>${t.origin ?? "create"}</td>
<td><form method="post" action="/ui/tokens/${encodeURIComponent(t.id)}/revoke" class="inline">${csrfInput(viewer)}<button type="submit" class="danger">Revoke</button></form></td></tr>`,
)}
</tbody></table>
<h2>New token</h2>
<form method="post" action="/ui/tokens" class="row">${csrfInput(viewer)}
<label>User (e-mail for a person) <input name="user" required data-testid="token-user"></label>
<label>Role <select name="role"><option>user</option><option>viewer</option><option>admin</option><option>sync</option></select></label>
<label>Apps (viewer) <input name="apps" placeholder="a,b"></label>
<label>Expires in <input name="expiresIn" placeholder="30d" size="6"></label>
<button type="submit">Create</button></form>`,
    );
  };

  app.get("/ui/tokens", async (c) => c.html(await tokensPage(ui(c), c.req.query("done") === "revoked" ? notice("The token was revoked.") : "")));
  app.post("/ui/tokens", async (c) => {
    const r = ui(c);
    const form = await c.req.parseBody();
    const apps = field(form, "apps").split(",").map((s) => s.trim()).filter(Boolean);
    const expiresIn = field(form, "expiresIn").trim();
    const res = await r.json<{ token: string; id: string }>("/api/v1/tokens", {
      method: "POST",
      body: { user: field(form, "user").trim(), role: field(form, "role"), ...(apps.length > 0 && { apps }), ...(expiresIn !== "" && { expiresIn }) },
    });
    if (!res.ok) return c.html(await tokensPage(r, apiErrorBox(res.error)), res.status as 400);
    // Shown once, on this answer only (no redirect: the token is not put in a URL or a cookie).
    return c.html(await tokensPage(r, html`<div class="notice" role="status">Token ${res.value.id} created. Copy it now; it is not shown again: <code data-testid="new-token">${res.value.token}</code></div>`));
  });
  app.post("/ui/tokens/:id/revoke", async (c) => {
    const r = ui(c);
    const res = await r.json(`/api/v1/tokens/${encodeURIComponent(c.req.param("id"))}`, { method: "DELETE" });
    if (!res.ok) return c.html(await tokensPage(r, errorBox(res.error.message)), res.status as 400);
    return c.redirect("/ui/tokens?done=revoked", 303);
  });

  return app;
}

function emails(s: string): string[] {
  return s.split(/[,\s]+/).map((x) => x.trim()).filter(Boolean);
}
