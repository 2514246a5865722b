// The logs page (docs/web-console.md, "Logs"): one instance or the whole group merged, live, with
// a filter box, a pause button and a download. The browser reads a server-sent event stream that
// carries GET /api/podgroups/logs's NDJSON records one per event; when the browser goes, the API
// call is aborted, which ends the engines' log streams.
import { Hono } from "hono";
import { html } from "hono/html";
import type { PodGroupWithSpec } from "../../resources/podgroup.ts";
import { qs, ui, type UiEnv } from "../context.ts";
import { errorBox, page } from "../layout.ts";

export function logPages(): Hono<UiEnv> {
  const app = new Hono<UiEnv>();

  app.get("/ui/podgroups/:name/logs", async (c) => {
    const { viewer, json } = ui(c);
    const name = c.req.param("name");
    const instance = c.req.query("instance") ?? "";
    const res = await json<PodGroupWithSpec>(`/api/podgroups${qs({ name })}`);
    if (!res.ok) return c.html(page(`Logs of ${name}`, viewer, "podgroups", errorBox(res.error.message)), res.status === 404 ? 404 : 403);
    const enc = encodeURIComponent(name);
    const instances = [...new Set((res.value.pods ?? []).map((p) => p.instanceNo))].sort((a, b) => a - b);
    const body = html`<p><a href="/ui/podgroups/${enc}">Back to ${name}</a></p>
<form method="get" action="/ui/podgroups/${enc}/logs" class="row">
<label>Instance <select name="instance" data-autosubmit data-testid="log-instance"><option value="">all, merged</option>${instances.map((i) => html`<option value="${i}"${String(i) === instance ? " selected" : ""}>${i}</option>`)}</select></label>
<label>Filter <input type="search" id="log-filter" placeholder="text in the line" data-testid="log-filter"></label>
<button type="button" id="log-pause" class="quiet" data-testid="log-pause">Pause</button>
<a class="button" href="/ui/podgroups/${enc}/logs/download${qs({ instance })}" data-testid="log-download">Download</a>
<span id="log-state" class="hint" data-testid="log-state">connecting</span>
</form>
<div id="log" class="logs" data-stream="/ui/podgroups/${enc}/logs/stream${qs({ instance })}" data-testid="log"></div>`;
    return c.html(page(`Logs of ${name}`, viewer, "podgroups", body, { scripts: ["/ui/static/logs.js"] }));
  });

  app.get("/ui/podgroups/:name/logs/stream", async (c) => {
    const name = c.req.param("name");
    const instance = c.req.query("instance");
    const upstream = new AbortController();
    const browser = c.req.raw.signal;
    const stop = () => upstream.abort();
    browser.addEventListener("abort", stop, { once: true });
    const res = await ui(c).call(`/api/podgroups/logs${qs({ name, instance, follow: true, tail: 500, timestamps: true })}`, { accept: "application/x-ndjson", signal: upstream.signal });
    const headers = { "Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-store", "X-Accel-Buffering": "no" };
    if (!res.ok || res.body === null) {
      browser.removeEventListener("abort", stop);
      const text = await res.text().catch(() => "");
      let message = `${res.status}`;
      try {
        message = (JSON.parse(text) as { message?: string }).message ?? message;
      } catch {
        // not JSON: the status says it
      }
      return c.body(`event: failure\ndata: ${JSON.stringify({ message })}\n\n`, 200, headers);
    }
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let pending = "";
    let heartbeat: NodeJS.Timeout | undefined;
    const encoder = new TextEncoder();
    const events = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(encoder.encode("retry: 5000\n\n"));
        // A comment now and then keeps proxies from cutting a quiet stream.
        heartbeat = setInterval(() => controller.enqueue(encoder.encode(": keep-alive\n\n")), 20_000);
        heartbeat.unref();
      },
      async pull(controller) {
        const { done, value } = await reader.read().catch(() => ({ done: true as const, value: undefined }));
        if (done) {
          clearInterval(heartbeat);
          if (pending.trim() !== "") controller.enqueue(encoder.encode(`data: ${pending.trim()}\n\n`));
          controller.enqueue(encoder.encode("event: end\ndata: {}\n\n"));
          browser.removeEventListener("abort", stop);
          controller.close();
          return;
        }
        pending += value;
        const lines = pending.split("\n");
        pending = lines.pop() ?? "";
        const out = lines.filter((l) => l.trim() !== "").map((l) => `data: ${l}\n\n`).join("");
        if (out !== "") controller.enqueue(encoder.encode(out));
      },
      cancel() {
        clearInterval(heartbeat);
        stop();
        void reader.cancel().catch(() => undefined);
      },
    });
    return c.body(events, 200, headers);
  });

  app.get("/ui/podgroups/:name/logs/download", async (c) => {
    const name = c.req.param("name");
    const instance = c.req.query("instance");
    const res = await ui(c).call(`/api/podgroups/logs${qs({ name, instance, timestamps: true })}`, { accept: "text/plain", signal: c.req.raw.signal });
    if (!res.ok || res.body === null) return c.html(page(`Logs of ${name}`, ui(c).viewer, "podgroups", errorBox(`The logs could not be read (${res.status}).`)), res.status === 404 ? 404 : 503);
    const file = `${name}${instance ? `-${instance}` : ""}.log`.replace(/[^A-Za-z0-9._-]/g, "_");
    return c.body(res.body, 200, { "Content-Type": "text/plain; charset=utf-8", "Content-Disposition": `attachment; filename="${file}"` });
  });

  return app;
}
