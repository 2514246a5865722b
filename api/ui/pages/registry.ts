// The image registry's repositories and tags (docs/web-console.md, "Registry"), when the process
// runs the registry (`capstan up`). Every call is the registry's own API with a registry token the
// console issues for the signed-in user (GET /api/v1/authorize/registry/), so the registry's rules
// decide: an admin lists the catalog; a maintainer pulls and deletes in its apps' repositories.
import { Hono } from "hono";
import { html } from "hono/html";
import { may } from "../../auth/index.ts";
import { readApi, type ApiCaller, type ApiResult } from "../api-client.ts";
import { field, qs, ui, type UiEnv, type UiRequest } from "../context.ts";
import { csrfInput, errorBox, notice, page, type Html } from "../layout.ts";
import { apiErrorBox } from "./podgroups.ts";

/** A repository name as distribution allows it: lower-case path components separated by "/". */
const repositoryName = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$/;
const tagName = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;

export function registryPages(registry: ApiCaller): Hono<UiEnv> {
  const app = new Hono<UiEnv>();

  /** Calls the registry with a token for `scopes`, issued to the viewer. */
  const call = async <T>(r: UiRequest, path: string, scopes: string[], method: "GET" | "DELETE" = "GET"): Promise<ApiResult<T>> => {
    const token = await r.json<{ token: string }>(`/api/v1/authorize/registry/?${scopes.map((s) => `scope=${encodeURIComponent(s)}`).join("&")}`);
    if (!token.ok) return token;
    return readApi<T>(await registry(path, { method, token: token.value.token }));
  };

  app.get("/ui/registry", async (c) => {
    const r = ui(c);
    const { viewer } = r;
    let repos: string[];
    let failure: Html | "" = "";
    if (viewer.who.role === "admin") {
      const res = await call<{ repositories: string[] }>(r, "/v2/_catalog?n=1000", ["registry:catalog:*"]);
      repos = res.ok ? res.value.repositories : [];
      if (!res.ok) failure = apiErrorBox(res.error);
    } else {
      // The catalog is an admin's; others see the repositories named for their apps that exist.
      const own = [...viewer.who.apps].sort();
      const found = await Promise.all(own.map(async (a) => ((await call(r, `/v2/${a}/tags/list?n=1`, [`repository:${a}:pull`])).ok ? a : undefined)));
      repos = found.filter((a): a is string => a !== undefined);
    }
    const body = html`${failure}
<form method="get" action="/ui/registry/repository" class="row"><label>Repository <input name="name" required placeholder="app/name" data-testid="repository-name"></label><button type="submit" class="quiet">Open</button></form>
${
  repos.length === 0
    ? html`<p class="hint">No repositories${viewer.who.role === "admin" ? "" : " named for your apps"}.</p>`
    : html`<table data-testid="repositories"><thead><tr><th>Repository</th></tr></thead><tbody>${repos.map((name) => html`<tr><td><a href="/ui/registry/repository${qs({ name })}">${name}</a></td></tr>`)}</tbody></table>`
}`;
    return c.html(page("Registry", viewer, "registry", body));
  });

  const repositoryPage = async (r: UiRequest, name: string, extra: Html | "" = "") => {
    const { viewer } = r;
    if (!repositoryName.test(name)) return { status: 400 as const, html: page("Registry", viewer, "registry", errorBox(`${JSON.stringify(name.slice(0, 100))} is not a repository name`)) };
    const res = await call<{ name: string; tags: string[] | null }>(r, `/v2/${name}/tags/list`, [`repository:${name}:pull`]);
    if (!res.ok) return { status: (res.status === 404 ? 404 : 403) as 404 | 403, html: page(name, viewer, "registry", html`${extra}${apiErrorBox(res.error)}`) };
    const canDelete = may(viewer.who, "write", name.split("/")[0]!);
    const tags = [...(res.value.tags ?? [])].sort();
    return {
      status: 200 as const,
      html: page(
        name,
        viewer,
        "registry",
        html`${extra}<p><a href="/ui/registry">All repositories</a></p>
${
  tags.length === 0
    ? html`<p class="hint">No tags.</p>`
    : html`<table data-testid="tags"><thead><tr><th>Tag</th><th>Reference (after the registry host)</th><th></th></tr></thead><tbody>
${tags.map(
  (tag) => html`<tr data-tag="${tag}"><td>${tag}</td><td><code>${name}:${tag}</code></td><td>${
    canDelete
      ? html`<form method="post" action="/ui/registry/repository/delete" class="inline">${csrfInput(viewer)}<input type="hidden" name="name" value="${name}"><input type="hidden" name="tag" value="${tag}"><button type="submit" class="danger" data-testid="delete-tag-${tag}">Delete tag</button></form>`
      : ""
  }</td></tr>`,
)}</tbody></table>`
}`,
      ),
    };
  };

  app.get("/ui/registry/repository", async (c) => {
    const r = ui(c);
    const { status, html: body } = await repositoryPage(r, c.req.query("name") ?? "", c.req.query("done") === "deleted" ? notice("The tag was deleted.") : "");
    return c.html(body, status);
  });

  app.post("/ui/registry/repository/delete", async (c) => {
    const r = ui(c);
    const form = await c.req.parseBody();
    const name = field(form, "name");
    const tag = field(form, "tag");
    if (!repositoryName.test(name) || !tagName.test(tag)) return c.html(page("Registry", r.viewer, "registry", errorBox("The repository or tag name is not valid.")), 400);
    const res = await call(r, `/v2/${name}/manifests/${tag}`, [`repository:${name}:delete`], "DELETE");
    if (!res.ok) {
      const { status, html: body } = await repositoryPage(r, name, apiErrorBox(res.error));
      return c.html(body, status === 200 ? (res.status === 404 ? 404 : 403) : status);
    }
    return c.redirect(`/ui/registry/repository${qs({ name, done: "deleted" })}`, 303);
  });

  return app;
}
