// Cluster pages (docs/web-console.md, "Pages"): nodes with their resources and a drift form for
// admins, dependencies, and events.
import { Hono } from "hono";
import { html } from "hono/html";
import type { NodeRecord } from "../../resources/node.ts";
import type { DependencyWithStatus } from "../../resources/dependency.ts";
import { field, qs, ui, type UiEnv } from "../context.ts";
import { age, bytes, csrfInput, errorBox, notice, page, type Html } from "../layout.ts";
import { apiErrorBox } from "./podgroups.ts";

/** An event as GET /api/events answers it (docs/events.md); fields a page does not need are left out. */
export interface EventView {
  type?: string;
  reason?: string;
  kind?: string;
  name?: string;
  app?: string;
  instance?: number;
  node?: string;
  message?: string;
  count?: number;
  lastTime?: string;
}

export function eventsTable(events: EventView[]): Html {
  if (events.length === 0) return html`<p class="hint" data-testid="events-empty">No events.</p>`;
  return html`<table data-testid="events"><thead><tr><th>Last seen</th><th>Type</th><th>Reason</th><th>Object</th><th class="num">Count</th><th>Message</th></tr></thead><tbody>
${events.map(
  (e) => html`<tr><td>${age(e.lastTime)}</td><td class="${e.type === "Warning" ? "state-failed" : ""}">${e.type ?? ""}</td><td>${e.reason ?? ""}</td>
<td>${e.kind === "podgroup" && e.name ? html`<a href="/ui/podgroups/${encodeURIComponent(e.name)}">${e.kind}/${e.name}</a>` : `${e.kind ?? ""}/${e.name ?? ""}`}${e.instance !== undefined ? `/${e.instance}` : ""}</td>
<td class="num">${e.count ?? 1}</td><td>${e.message ?? ""}</td></tr>`,
)}
</tbody></table>`;
}

export function clusterPages(): Hono<UiEnv> {
  const app = new Hono<UiEnv>();

  const nodesPage = async (viewer: ReturnType<typeof ui>["viewer"], json: ReturnType<typeof ui>["json"], extra: Html | "" = "") => {
    const nodes = await json<NodeRecord[]>("/api/nodes");
    if (!nodes.ok) return page("Nodes", viewer, "nodes", html`${extra}${apiErrorBox(nodes.error)}`);
    const admin = viewer.who.role === "admin";
    const names = nodes.value.map((n) => n.name);
    return page(
      "Nodes",
      viewer,
      "nodes",
      html`${extra}<table data-testid="nodes"><thead><tr><th>Node</th><th>State</th><th>Endpoint</th><th class="num">CPUs reserved / total</th><th class="num">Memory reserved / total</th><th class="num">Containers running / all</th><th>Engine</th><th>Labels</th>${admin ? html`<th>Drift</th>` : ""}</tr></thead><tbody>
${nodes.value.map(
  (n) => html`<tr><td>${n.name}</td><td class="state-${n.state}">${n.state}${n.error ? html`<div class="hint">${n.error}</div>` : ""}</td><td><code>${n.endpoint}</code></td>
<td class="num">${Math.round(n.reserved.cpus * 100) / 100} / ${n.cpus}</td><td class="num">${bytes(n.reserved.memoryBytes)} / ${bytes(n.memoryBytes)}</td><td class="num">${n.containersRunning} / ${n.containers}</td>
<td>${n.engineVersion}</td><td>${Object.entries(n.labels).map(([k, v]) => html`<code>${k}=${v}</code> `)}</td>
${
  admin
    ? html`<td><form method="post" action="/ui/nodes/drift" class="row">${csrfInput(viewer)}<input type="hidden" name="from" value="${n.name}">
<select name="to"><option value="">any other node</option>${names.filter((x) => x !== n.name).map((x) => html`<option>${x}</option>`)}</select>
<label><span><input type="checkbox" name="force" value="true"> stateful too</span></label>
<button type="submit" class="quiet">Drift off ${n.name}</button></form></td>`
    : ""
}</tr>`,
)}
</tbody></table>`,
    );
  };

  app.get("/ui/nodes", async (c) => {
    const { viewer, json } = ui(c);
    return c.html(await nodesPage(viewer, json, c.req.query("done") === "drift" ? notice("The drift was accepted; the instances move one at a time.") : ""));
  });

  app.post("/ui/nodes/drift", async (c) => {
    const { viewer, json } = ui(c);
    const form = await c.req.parseBody();
    const res = await json("/api/nodes" + qs({ cmd: "drift", from: field(form, "from"), to: field(form, "to"), force: field(form, "force") === "true" ? "true" : undefined }), { method: "PATCH" });
    if (!res.ok) return c.html(await nodesPage(viewer, json, apiErrorBox(res.error)), res.status as 400);
    return c.redirect("/ui/nodes?done=drift", 303);
  });

  app.get("/ui/depends", async (c) => {
    const { viewer, json } = ui(c);
    const deps = await json<DependencyWithStatus[]>("/api/depends/_all");
    const body = deps.ok
      ? deps.value.length === 0
        ? html`<p class="hint">No dependencies.</p>`
        : html`<table data-testid="depends"><thead><tr><th>Name</th><th>App</th><th>State</th><th>Instances</th><th>Last error</th></tr></thead><tbody>
${deps.value.map(
  (d) => html`<tr><td>${d.spec.name}</td><td>${d.spec.namespace}</td><td class="state-${d.state}">${d.state}</td><td>${d.pods.map((p) => html`<div>${p.node}${p.namespace ? ` (${p.namespace})` : ""}: ${p.state}, ${p.refCount} reference(s)</div>`)}</td><td>${d.lastError}</td></tr>`,
)}}
</tbody></table>`
      : deps.status === 404
        ? html`<p class="hint">Dependencies are not served by this process.</p>`
        : errorBox(deps.error.message);
    return c.html(page("Dependencies", viewer, "depends", body));
  });

  app.get("/ui/events", async (c) => {
    const { viewer, json } = ui(c);
    const appName = c.req.query("app") ?? "";
    const events = await json<EventView[]>(`/api/events${qs({ app: appName, limit: 500 })}`);
    const body = html`<form method="get" action="/ui/events" class="row"><label>App <input name="app" value="${appName}"></label><button type="submit" class="quiet">Show</button></form>
${events.ok ? eventsTable(events.value.slice().reverse()) : events.status === 404 ? html`<p class="hint">Events are not served by this process.</p>` : apiErrorBox(events.error)}`;
    return c.html(page("Events", viewer, "events", body));
  });

  return app;
}
