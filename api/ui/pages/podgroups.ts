// Overview and PodGroup pages (docs/web-console.md, "Pages"): the list with filtering and paging,
// one group's instances (live), its spec (editable, errors next to their lines), scale, restart,
// delete, and a new group from YAML. Reads and writes are the orchestrator API's, as the viewer.
import { Hono, type Context } from "hono";
import { html } from "hono/html";
import { stringify } from "yaml";
import { may } from "../../auth/index.ts";
import type { NodeRecord } from "../../resources/node.ts";
import type { SpecVersion } from "../../orchestrator/history.ts";
import type { PodGroupWithSpec, PodStatus } from "../../resources/podgroup.ts";
import type { ApiFailure } from "../api-client.ts";
import { field, qs, ui, type UiEnv } from "../context.ts";
import { age, bytes, csrfInput, errorBox, notice, page, type Html, type Viewer } from "../layout.ts";
import { parseYamlForm } from "../yaml-lines.ts";
import { eventsTable, type EventView } from "./cluster.ts";

export const pageSize = 50;

const done: Record<string, string> = {
  created: "The PodGroup was accepted; its instances are being deployed.",
  scaled: "The new instance count was accepted.",
  restarted: "A rolling restart was requested: the instances are replaced one at a time.",
  updated: "The new spec was accepted and is rolled out one instance at a time.",
  unchanged: "The spec is the one already running; nothing to do.",
  deleted: "The PodGroup is being deleted.",
  rolledback: "The older spec was accepted as a new version and is rolled out one instance at a time.",
};

export function podGroupPages(): Hono<UiEnv> {
  const app = new Hono<UiEnv>();

  app.get("/ui/", async (c) => {
    const { viewer, json } = ui(c);
    const [groups, nodes, events] = await Promise.all([
      json<PodGroupWithSpec[]>("/api/podgroups/_all"),
      json<NodeRecord[]>("/api/nodes"),
      json<EventView[]>("/api/events?limit=15"),
    ]);
    const all = groups.ok ? groups.value : [];
    const counts = all.reduce(
      (n, g) => {
        const c = instanceCounts(g);
        return { groups: n.groups + 1, desired: n.desired + c.desired, running: n.running + c.running, failed: n.failed + (c.failed > 0 || g.state === "failed" ? 1 : 0) };
      },
      { groups: 0, desired: 0, running: 0, failed: 0 },
    );
    const body = html`${groups.ok ? "" : unavailable("PodGroups", groups.error)}
<section class="cards" data-testid="summary">
<div class="card"><div class="n">${counts.groups}</div>PodGroups</div>
<div class="card"><div class="n">${counts.running}/${counts.desired}</div>instances running</div>
<div class="card"><div class="n">${counts.failed}</div>groups with failures</div>
<div class="card"><div class="n">${nodes.ok ? nodes.value.filter((n) => n.state === "ready").length : "?"}/${nodes.ok ? nodes.value.length : "?"}</div>nodes ready</div>
</section>
<h2>PodGroups</h2>
${groupList(viewer, all, listQuery(c), "/ui/")}
<h2>Nodes</h2>
${nodes.ok ? nodeSummary(nodes.value) : unavailable("Nodes", nodes.error)}
<h2>Recent events</h2>
${events.ok ? eventsTable(events.value.slice(-15).reverse()) : events.status === 404 ? html`<p class="hint">Events are not served by this process.</p>` : unavailable("Events", events.error)}`;
    return c.html(page("Overview", viewer, "overview", body));
  });

  app.get("/ui/podgroups", async (c) => {
    const { viewer, json } = ui(c);
    const groups = await json<PodGroupWithSpec[]>("/api/podgroups/_all");
    const body = groups.ok ? groupList(viewer, groups.value, listQuery(c), "/ui/podgroups") : unavailable("PodGroups", groups.error);
    return c.html(page("PodGroups", viewer, "podgroups", html`${doneNotice(c)}${body}`));
  });

  // --- a new group ---------------------------------------------------------------------------
  const newForm = (viewer: Viewer, text: string, failure?: Html) =>
    page(
      "New PodGroup",
      viewer,
      "podgroups",
      html`${failure ?? ""}<form method="post" action="/ui/podgroups/new">${csrfInput(viewer)}
<p class="hint">A PodGroupSpec in YAML (docs/api-reference.md, "PodGroupSpec"); the same body <code>capstan apply</code> sends.</p>
<textarea class="code" name="spec" spellcheck="false" data-testid="spec">${text}</textarea>
<p><button type="submit" data-testid="create">Create</button></p></form>`,
    );
  app.get("/ui/podgroups/new", (c) => {
    const app0 = ui(c).viewer.who.apps.values().next().value ?? "myapp";
    return c.html(newForm(ui(c).viewer, template(app0)));
  });
  app.post("/ui/podgroups/new", async (c) => {
    const { viewer, json } = ui(c);
    const text = field(await c.req.parseBody(), "spec");
    const parsed = parseYamlForm(text);
    if ("syntax" in parsed) return c.html(newForm(viewer, text, errorBox("The YAML does not parse.", parsed.syntax.map((s) => ({ path: "yaml", message: s.message, line: s.line })))), 400);
    const res = await json<{ message: string }>("/api/podgroups", { method: "POST", body: parsed.value ?? {} });
    if (!res.ok) return c.html(newForm(viewer, text, apiErrorBox(res.error, parsed.lineOf)), res.status as 400);
    const name = nameOf(parsed.value);
    return c.redirect(`/ui/podgroups/${encodeURIComponent(name)}?done=created`, 303);
  });

  // --- one group ----------------------------------------------------------------------------
  const groupPage = async (c: Context<UiEnv>, name: string, extra: { failure?: Html; specText?: string } = {}, status: 200 | 400 | 403 | 404 | 409 | 503 = 200) => {
    const { viewer, json } = ui(c);
    const [res, history] = await Promise.all([json<PodGroupWithSpec>(`/api/podgroups${qs({ name })}`), json<SpecVersion[]>(`/api/podgroups/history${qs({ name })}`)]);
    if (!res.ok) return c.html(page(name, viewer, "podgroups", html`${extra.failure ?? ""}${errorBox(res.error.message)}<p><a href="/ui/podgroups">All PodGroups</a></p>`), res.status === 404 ? 404 : res.status === 403 ? 403 : 503);
    const g = res.value;
    const canWrite = may(viewer.who, "write", g.spec.namespace);
    const canExec = may(viewer.who, "exec", g.spec.namespace);
    const enc = encodeURIComponent(name);
    const body = html`${doneNotice(c)}${extra.failure ?? ""}
<dl class="facts" data-testid="facts">
<dt>App</dt><dd>${g.spec.namespace}</dd>
${g.spec.deleting ? html`<dt>State</dt><dd class="state-removing">being deleted</dd>` : ""}
<dt>Instances</dt><dd>${g.spec.numInstances}, restart policy ${g.spec.restartPolicy}</dd>
<dt>Pod version</dt><dd>${g.spec.pod.version} (converged: ${g.observedVersion})</dd>
${g.lastError ? html`<dt>Last error</dt><dd class="state-failed">${g.lastError}</dd>` : ""}
${g.spec.pod.annotation ? html`<dt>Annotation</dt><dd data-testid="annotation">${g.spec.pod.annotation}</dd>` : ""}
<dt>Updated</dt><dd>${age(g.spec.updatedAt)} ago</dd>
</dl>
<p><a href="/ui/podgroups/${enc}/logs">Logs</a>${canExec ? html` · <a href="/ui/podgroups/${enc}/exec">Exec</a>` : ""}</p>
<h2>Instances</h2>
${instancesFragment(g)}
${
  canWrite && !g.spec.deleting
    ? html`<h2>Actions</h2><div class="actions">
<form method="post" action="/ui/podgroups/${enc}/scale" class="row">${csrfInput(viewer)}
<label>Instances <input type="number" name="num_instances" min="0" max="1000" value="${g.spec.numInstances}" required data-testid="num-instances"></label>
<label>Restart policy <select name="restart_policy">${["never", "always", "onfail"].map((p) => html`<option value="${p}"${p === g.spec.restartPolicy ? " selected" : ""}>${p}</option>`)}</select></label>
<button type="submit" data-testid="scale">Scale</button></form>
<form method="post" action="/ui/podgroups/${enc}/restart" class="row">${csrfInput(viewer)}<button type="submit" class="quiet" data-testid="restart">Restart all, one at a time</button></form>
<form method="post" action="/ui/podgroups/${enc}/delete" class="row">${csrfInput(viewer)}
<label>Type the name to delete <input name="confirm" autocomplete="off" data-testid="delete-confirm"></label>
<button type="submit" class="danger" data-testid="delete">Delete</button></form>
</div>`
    : ""
}
<h2>Spec</h2>
${
  canWrite && !g.spec.deleting
    ? html`<form method="post" action="/ui/podgroups/${enc}/spec">${csrfInput(viewer)}
<p class="hint">The pod spec (docs/api-reference.md, "PodSpec"). Saving rolls it out one instance at a time.</p>
<textarea class="code" name="spec" spellcheck="false" data-testid="spec">${extra.specText ?? podYaml(g)}</textarea>
<p><button type="submit" data-testid="save-spec">Save and roll out</button></p></form>`
    : html`<pre class="code">${podYaml(g)}</pre>`
}
<h2>Version history</h2>
${history.ok ? historyTable(viewer, g, history.value, canWrite && !g.spec.deleting) : errorBox(history.error.message)}`;
    return c.html(page(name, viewer, "podgroups", body), status);
  };

  app.get("/ui/podgroups/:name", (c) => groupPage(c, c.req.param("name")));

  app.get("/ui/podgroups/:name/instances", async (c) => {
    const res = await ui(c).json<PodGroupWithSpec>(`/api/podgroups${qs({ name: c.req.param("name") })}`);
    // Still polling: a passing failure (a leader change's 503) must not stop the live table.
    if (!res.ok) return c.html(html`<div id="instances" hx-get="/ui/podgroups/${encodeURIComponent(c.req.param("name"))}/instances" hx-trigger="every 2s" hx-swap="outerHTML">${errorBox(res.error.message)}</div>`, res.status === 404 ? 404 : 200);
    return c.html(instancesFragment(res.value));
  });

  /** Runs an API write for a form and goes back to the group's page (or shows the error there). */
  const act = (path: (name: string, form: Record<string, unknown>) => { path: string; method: "POST" | "PATCH" | "DELETE"; body?: unknown } | { invalid: string }, doneCode: (message: string) => string, after?: (name: string) => string) =>
    async (c: Context<UiEnv>) => {
      const name = c.req.param("name")!;
      const form = await c.req.parseBody();
      const req = path(name, form);
      if ("invalid" in req) return groupPage(c, name, { failure: errorBox(req.invalid) }, 400);
      const res = await ui(c).json<{ message?: string }>(req.path, { method: req.method, ...(req.body !== undefined && { body: req.body }) });
      if (!res.ok) return groupPage(c, name, { failure: apiErrorBox(res.error) }, res.status as 400);
      return c.redirect(`${after?.(name) ?? `/ui/podgroups/${encodeURIComponent(name)}`}?done=${doneCode(res.value?.message ?? "")}`, 303);
    };

  app.post(
    "/ui/podgroups/:name/scale",
    act(
      (name, form) => ({ method: "PATCH", path: `/api/podgroups${qs({ name, cmd: "replica", num_instances: field(form, "num_instances"), restart_policy: field(form, "restart_policy") })}` }),
      () => "scaled",
    ),
  );
  app.post(
    "/ui/podgroups/:name/restart",
    act((name) => ({ method: "POST", path: `/api/podgroups/restart${qs({ name })}` }), () => "restarted"),
  );
  app.post(
    "/ui/podgroups/:name/delete",
    act(
      (name, form) => (field(form, "confirm").trim() === name ? { method: "DELETE", path: `/api/podgroups${qs({ name })}` } : { invalid: `Type the group's name, ${name}, to confirm the deletion.` }),
      () => "deleted",
      () => "/ui/podgroups",
    ),
  );
  // A rollback is a spec update to an older version's pod: it becomes the next version.
  app.post("/ui/podgroups/:name/rollback", async (c) => {
    const name = c.req.param("name");
    const version = Number(field(await c.req.parseBody(), "version"));
    const history = await ui(c).json<SpecVersion[]>(`/api/podgroups/history${qs({ name })}`);
    if (!history.ok) return groupPage(c, name, { failure: apiErrorBox(history.error) }, history.status as 400);
    const entry = history.value.find((e) => e.version === version);
    if (entry === undefined) return groupPage(c, name, { failure: errorBox(`Version ${field(await c.req.parseBody(), "version")} is not in this group's history.`) }, 400);
    const { version: _version, ...pod } = entry.pod;
    const res = await ui(c).json<{ message: string }>(`/api/podgroups${qs({ name, cmd: "spec" })}`, { method: "PATCH", body: pod });
    if (!res.ok) return groupPage(c, name, { failure: apiErrorBox(res.error) }, res.status as 400);
    return c.redirect(`/ui/podgroups/${encodeURIComponent(name)}?done=${res.value.message.includes("nothing to do") ? "unchanged" : "rolledback"}`, 303);
  });

  app.post("/ui/podgroups/:name/spec", async (c) => {
    const name = c.req.param("name");
    const text = field(await c.req.parseBody(), "spec");
    const parsed = parseYamlForm(text);
    if ("syntax" in parsed) return groupPage(c, name, { specText: text, failure: errorBox("The spec's YAML does not parse.", parsed.syntax.map((s) => ({ path: "yaml", message: s.message, line: s.line }))) }, 400);
    const res = await ui(c).json<{ message: string }>(`/api/podgroups${qs({ name, cmd: "spec" })}`, { method: "PATCH", body: parsed.value ?? {} });
    if (!res.ok) return groupPage(c, name, { specText: text, failure: apiErrorBox(res.error, parsed.lineOf) }, res.status as 400);
    return c.redirect(`/ui/podgroups/${encodeURIComponent(name)}?done=${res.value.message.includes("nothing to do") ? "unchanged" : "updated"}`, 303);
  });

  return app;
}

// --- pieces --------------------------------------------------------------------------------------

interface ListQuery {
  q: string;
  state: string;
  page: number;
}

function listQuery(c: Context): ListQuery {
  const n = Number.parseInt(c.req.query("page") ?? "1", 10);
  return { q: (c.req.query("q") ?? "").trim(), state: c.req.query("state") ?? "", page: Number.isFinite(n) && n > 0 ? n : 1 };
}

/** The groups a list shows: filtered by name/app and state, sorted by name, one page of them. */
export function pageOfGroups(all: PodGroupWithSpec[], q: ListQuery): { rows: PodGroupWithSpec[]; total: number; pages: number; page: number } {
  const needle = q.q.toLowerCase();
  const matching = all.filter((g) => (needle === "" || g.spec.name.toLowerCase().includes(needle) || g.spec.namespace.toLowerCase().includes(needle)) && (q.state === "" || g.state === q.state));
  matching.sort((a, b) => (a.spec.name < b.spec.name ? -1 : a.spec.name > b.spec.name ? 1 : 0));
  const pages = Math.max(1, Math.ceil(matching.length / pageSize));
  const pageNo = Math.min(q.page, pages);
  return { rows: matching.slice((pageNo - 1) * pageSize, pageNo * pageSize), total: matching.length, pages, page: pageNo };
}

function groupList(viewer: Viewer, all: PodGroupWithSpec[], q: ListQuery, base: string): Html {
  const { rows, total, pages, page: pageNo } = pageOfGroups(all, q);
  const canCreate = viewer.who.role === "admin" || viewer.who.role === "user";
  const link = (p: number) => `${base}${qs({ q: q.q, state: q.state, page: p })}`;
  return html`<form method="get" action="${base}" class="row">
<label>Filter <input type="search" name="q" value="${q.q}" placeholder="name or app" data-testid="filter"></label>
<label>State <select name="state"><option value="">any</option>${["running", "pending", "updating", "scaling", "degraded", "failed", "removing"].map((s) => html`<option${s === q.state ? " selected" : ""}>${s}</option>`)}</select></label>
<button type="submit" class="quiet">Apply</button>
${canCreate ? html`<a class="button" href="/ui/podgroups/new" data-testid="new-podgroup">New PodGroup</a>` : ""}
</form>
<table data-testid="podgroups"><thead><tr><th>Name</th><th>App</th><th>State</th><th class="num">Running / desired</th><th class="num">Failed</th><th class="num">Version</th><th>Updated</th></tr></thead><tbody>
${rows.map((g) => {
  const n = instanceCounts(g);
  return html`<tr><td><a href="/ui/podgroups/${encodeURIComponent(g.spec.name)}">${g.spec.name}</a></td><td>${g.spec.namespace}</td><td class="state-${g.state}">${g.state}</td><td class="num">${n.running} / ${n.desired}</td><td class="num">${n.failed}</td><td class="num">${g.spec.pod.version}</td><td>${age(g.spec.updatedAt)}</td></tr>`;
})}
</tbody></table>
<div class="pager"><span>${total} group(s)${total > pageSize ? `, page ${pageNo} of ${pages}` : ""}</span>
${pageNo > 1 ? html`<a href="${link(pageNo - 1)}">previous</a>` : ""}${pageNo < pages ? html`<a href="${link(pageNo + 1)}" data-testid="next-page">next</a>` : ""}</div>`;
}

export function instanceCounts(g: PodGroupWithSpec): { desired: number; running: number; failed: number } {
  const pods = g.pods ?? [];
  return {
    desired: g.spec.numInstances,
    running: pods.filter((p) => p.state === "running").length,
    failed: pods.filter((p) => p.state === "failed" || p.state === "exited" || p.state === "missing").length,
  };
}

/** The instances table; it asks for itself again every 2 s (htmx), so the page stays live without a reload. */
function instancesFragment(g: PodGroupWithSpec): Html {
  const enc = encodeURIComponent(g.spec.name);
  const pods: PodStatus[] = [...(g.pods ?? [])].sort((a, b) => a.instanceNo - b.instanceNo);
  return html`<div id="instances" hx-get="/ui/podgroups/${enc}/instances" hx-trigger="every 2s" hx-swap="outerHTML">
<p>Group state: <strong class="state-${g.state}" data-testid="group-state">${g.state}</strong></p>
<table data-testid="instances"><thead><tr><th class="num">#</th><th>State</th><th>Node</th><th class="num">Restarts</th><th>Container</th><th>Up</th><th>Last error</th><th></th></tr></thead><tbody>
${pods.map(
  (p) => html`<tr data-instance="${p.instanceNo}"><td class="num">${p.instanceNo}</td><td class="state-${p.state}">${p.state}</td><td>${p.node}</td><td class="num">${p.restartCount}</td>
<td>${p.containers.map((k) => html`<div><code>${k.id.slice(0, 12)}</code> ${k.status}${k.hostPort ? ` :${k.hostPort}` : ""}</div>`)}</td>
<td>${p.containers[0]?.status === "running" ? age(p.containers[0]?.startedAt) : ""}</td><td>${p.lastError}</td>
<td><a href="/ui/podgroups/${enc}/logs?instance=${p.instanceNo}">logs</a></td></tr>`,
)}
</tbody></table></div>`;
}

/** The stored versions, each with what differs at a glance (images, command) and a rollback button. */
function historyTable(viewer: Viewer, g: PodGroupWithSpec, versions: SpecVersion[], canWrite: boolean): Html {
  if (versions.length === 0) return html`<p class="hint">No stored versions.</p>`;
  const enc = encodeURIComponent(g.spec.name);
  return html`<table data-testid="history"><thead><tr><th class="num">Version</th><th>Saved</th><th>Containers</th><th></th></tr></thead><tbody>
${versions.map(
  (v) => html`<tr data-version="${v.version}"><td class="num">${v.version}${v.version === g.spec.pod.version ? html` <small>(current)</small>` : ""}</td><td>${age(v.savedAt)} ago</td>
<td>${v.pod.containers.map((k) => html`<div><code>${k.image}</code> ${(k.command ?? []).join(" ")}</div>`)}</td>
<td>${
    canWrite && v.version !== g.spec.pod.version
      ? html`<form method="post" action="/ui/podgroups/${enc}/rollback" class="inline">${csrfInput(viewer)}<input type="hidden" name="version" value="${v.version}"><button type="submit" class="quiet" data-testid="rollback-${v.version}">Roll back to this</button></form>`
      : ""
  }</td></tr>`,
)}
</tbody></table>`;
}

function nodeSummary(nodes: NodeRecord[]): Html {
  return html`<table data-testid="nodes"><thead><tr><th>Node</th><th>State</th><th class="num">CPU reserved / total</th><th class="num">Memory reserved / total</th><th class="num">Containers</th></tr></thead><tbody>
${nodes.map((n) => html`<tr><td>${n.name}</td><td class="state-${n.state}">${n.state}</td><td class="num">${round(n.reserved.cpus)} / ${n.cpus}</td><td class="num">${bytes(n.reserved.memoryBytes)} / ${bytes(n.memoryBytes)}</td><td class="num">${n.containersRunning} / ${n.containers}</td></tr>`)}
</tbody></table>`;
}

const round = (n: number) => Math.round(n * 100) / 100;

/** The pod spec as the editor shows it: what PATCH cmd=spec takes (the server keeps the version). */
function podYaml(g: PodGroupWithSpec): string {
  const { version: _version, ...pod } = g.spec.pod;
  return stringify(pod, { lineWidth: 0 });
}

function template(app: string): string {
  return stringify(
    { name: `${app}.web.demo`, namespace: app, numInstances: 1, restartPolicy: "always", pod: { namespace: app, containers: [{ image: "busybox:latest", command: ["sh", "-c", "echo hello; sleep 100000"], memoryLimit: 16777216 }] } },
    { lineWidth: 0 },
  );
}

function nameOf(value: unknown): string {
  return typeof value === "object" && value !== null && typeof (value as { name?: unknown }).name === "string" ? (value as { name: string }).name : "";
}

/** An API failure with its fields, each at its line of the YAML the user sent when known. */
export function apiErrorBox(error: ApiFailure, lineOf?: (path: string) => number | undefined): Html {
  return errorBox(
    error.message,
    error.details.map((d) => {
      const line = lineOf?.(d.path);
      return { ...d, ...(line !== undefined && { line }) };
    }),
  );
}

function unavailable(what: string, error: ApiFailure): Html {
  return errorBox(`${what}: ${error.message}`);
}

function doneNotice(c: Context): Html | "" {
  const code = c.req.query("done");
  return code !== undefined && Object.hasOwn(done, code) ? notice(done[code]!) : "";
}
