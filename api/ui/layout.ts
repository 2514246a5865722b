// The page shell every web console page shares: head, navigation, the signed-in user, and the
// pieces htmx reads (its config, the CSRF header of every request it makes). Everything is built
// with hono/html's `html` template, which escapes every interpolated value: a name, annotation or
// secret path holding `<script>` or quotes renders as text (docs/web-console.md, "Security").
import { html } from "hono/html";
import type { HtmlEscapedString } from "hono/utils/html";
import type { Principal } from "../auth/index.ts";
import { csrfField } from "./session.ts";

export type Html = HtmlEscapedString | Promise<HtmlEscapedString>;

/** What a page knows of its viewer. */
export interface Viewer {
  who: Principal;
  /** CSRF token of the session ("" when authentication is off and there is no session). */
  csrf: string;
  /** Authentication is on: a session exists and can be ended. */
  signedIn: boolean;
  /** This process runs the image registry (the Registry pages exist). */
  registry?: boolean;
}

const htmxConfig = JSON.stringify({ includeIndicatorStyles: false, allowEval: false, allowScriptTags: false, selfRequestsOnly: true, historyCacheSize: 0 });

export type Section = "overview" | "podgroups" | "nodes" | "depends" | "apps" | "tokens" | "events" | "registry" | "";

export function page(title: string, viewer: Viewer | undefined, section: Section, body: Html, opts: { scripts?: string[]; styles?: string[] } = {}): Html {
  const nav = viewer === undefined ? "" : navigation(viewer, section);
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="htmx-config" content="${htmxConfig}">
<title>${title} · Capstan</title>
<link rel="stylesheet" href="/ui/static/console.css">
${(opts.styles ?? []).map((s) => html`<link rel="stylesheet" href="${s}">`)}
<script src="/ui/static/htmx.min.js" defer></script>
<script src="/ui/static/console.js" defer></script>
${(opts.scripts ?? []).map((s) => html`<script src="${s}" defer></script>`)}
</head>
<body hx-headers="${viewer && viewer.csrf !== "" ? JSON.stringify({ "x-csrf-token": viewer.csrf }) : "{}"}">
${nav}
<main>
<h1>${title}</h1>
${body}
</main>
</body>
</html>`;
}

function navigation(viewer: Viewer, section: Section): Html {
  const link = (href: string, label: string, s: Section) => html`<a href="${href}"${s === section ? html` aria-current="page"` : ""}>${label}</a>`;
  const admin = viewer.who.role === "admin";
  return html`<header class="bar">
<a class="brand" href="/ui/">Capstan</a>
<nav>
${link("/ui/", "Overview", "overview")}
${link("/ui/podgroups", "PodGroups", "podgroups")}
${link("/ui/nodes", "Nodes", "nodes")}
${link("/ui/depends", "Dependencies", "depends")}
${link("/ui/events", "Events", "events")}
${link("/ui/apps", "Apps", "apps")}
${viewer.registry ? link("/ui/registry", "Registry", "registry") : ""}
${admin ? link("/ui/tokens", "Tokens", "tokens") : ""}
</nav>
<span class="who" data-testid="who">${viewer.who.user} <small>(${viewer.who.role})</small></span>
${viewer.signedIn ? html`<form method="post" action="/ui/logout" class="inline">${csrfInput(viewer)}<button type="submit">Sign out</button></form>` : ""}
</header>`;
}

/** The hidden CSRF field of a plain form. */
export function csrfInput(viewer: Viewer): Html {
  return html`<input type="hidden" name="${csrfField}" value="${viewer.csrf}">`;
}

/** An API error, with the fields it names. */
export function errorBox(message: string, details: { path: string; message: string; line?: number }[] = []): Html {
  return html`<div class="error" role="alert"><p>${message}</p>${
    details.length > 0
      ? html`<ul class="field-errors">${details.map((d) => html`<li data-field="${d.path}">${d.line !== undefined ? html`<span class="line">line ${d.line}</span> ` : ""}<code>${d.path}</code>: ${d.message}</li>`)}</ul>`
      : ""
  }</div>`;
}

export function notice(message: string): Html {
  return html`<div class="notice" role="status">${message}</div>`;
}

/** "3m 20s", "2h 5m", "4d 1h": how long since `iso`. */
export function age(iso: string | undefined, now = Date.now()): string {
  if (iso === undefined || iso === "") return "";
  const t = Date.parse(iso);
  if (!Number.isFinite(t) || t <= 0) return "";
  let s = Math.max(0, Math.floor((now - t) / 1000));
  const d = Math.floor(s / 86400);
  s -= d * 86400;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  if (d > 0) return `${d}d ${h}h`;
  if (h > 0) return `${h}h ${m}m`;
  if (m > 0) return `${m}m ${s}s`;
  return `${s}s`;
}

/** 1.5 GiB, 512 MiB: bytes for people. */
export function bytes(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v >= 10 || i === 0 ? Math.round(v) : v.toFixed(1)} ${units[i]}`;
}
