// The exec terminal (docs/web-console.md, "Exec"): xterm.js over GET /api/podgroups/exec's
// WebSocket, in Kubernetes' channel framing: to the server 0 = input, 4 = resize {"cols","rows"};
// from it 1 = stdout, 2 = stderr, 3 = the end {"exitCode"} or {"error"}. Nothing connects until
// the user presses Connect; the command is what the user typed.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const box = document.getElementById("terminal");
  const form = document.getElementById("exec-form");
  const state = document.getElementById("exec-state");
  if (!box || !form) return;
  const term = new Terminal({ cursorBlink: true, convertEol: false, fontSize: 13, scrollback: 5000 });
  const fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(box);
  fit.fit();
  const encoder = new TextEncoder();
  let socket = null;
  let ended = false;

  const send = (channel, bytes) => {
    if (!socket || socket.readyState !== WebSocket.OPEN) return;
    const out = new Uint8Array(bytes.length + 1);
    out[0] = channel;
    out.set(bytes, 1);
    socket.send(out);
  };
  const resize = () => send(4, encoder.encode(JSON.stringify({ cols: term.cols, rows: term.rows })));

  function connect() {
    if (socket) socket.close();
    ended = false;
    term.reset();
    const words = form.elements.cmd.value.trim().split(/\s+/).filter((w) => w !== "");
    const params = new URLSearchParams({ name: box.dataset.name, instance: form.elements.instance.value, tty: "true", stdin: "true", csrf_token: box.dataset.csrf });
    for (const w of words.length > 0 ? words : ["sh"]) params.append("cmd", w);
    const url = new URL(`/api/podgroups/exec?${params}`, location.href);
    url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
    state.textContent = "connecting";
    const ws = new WebSocket(url);
    socket = ws;
    ws.binaryType = "arraybuffer";
    ws.onopen = () => {
      state.textContent = "connected";
      resize();
      term.focus();
    };
    ws.onmessage = (e) => {
      const data = new Uint8Array(e.data);
      if (data.length === 0) return;
      const body = data.subarray(1);
      if (data[0] === 1 || data[0] === 2) term.write(body);
      else if (data[0] === 3) {
        const end = JSON.parse(new TextDecoder().decode(body));
        ended = true;
        state.textContent = end.error !== undefined ? `ended: ${end.error}` : `exited with code ${end.exitCode}`;
      }
    };
    ws.onclose = (e) => {
      if (!ended && socket === ws) state.textContent = `closed${e.reason ? `: ${e.reason}` : ""}`;
    };
    ws.onerror = () => {
      if (socket === ws) state.textContent = "could not connect";
    };
  }

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    connect();
  });
  term.onData((d) => send(0, encoder.encode(d)));
  term.onResize(resize);
  new ResizeObserver(() => fit.fit()).observe(box);
});
