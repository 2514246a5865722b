// The exec terminal (docs/web-console.md, "Exec"): xterm.js over GET /api/podgroups/exec's
// WebSocket, in Kubernetes' channel framing: to the server 0 = input, 4 = resize {"cols","rows"};
// from it 1 = stdout, 2 = stderr, 3 = the end {"exitCode"} or {"error"}.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const box = document.getElementById("terminal");
  const state = document.getElementById("exec-state");
  if (!box) return;
  const term = new Terminal({ cursorBlink: true, convertEol: false, fontSize: 13, scrollback: 5000 });
  const fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(box);
  fit.fit();
  const url = new URL(box.dataset.socket, location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  const socket = new WebSocket(url);
  socket.binaryType = "arraybuffer";
  const encoder = new TextEncoder();
  const send = (channel, bytes) => {
    if (socket.readyState !== WebSocket.OPEN) return;
    const out = new Uint8Array(bytes.length + 1);
    out[0] = channel;
    out.set(bytes, 1);
    socket.send(out);
  };
  const resize = () => send(4, encoder.encode(JSON.stringify({ cols: term.cols, rows: term.rows })));
  socket.onopen = () => {
    state.textContent = "connected";
    resize();
    term.focus();
  };
  socket.onmessage = (e) => {
    const data = new Uint8Array(e.data);
    if (data.length === 0) return;
    const body = data.subarray(1);
    if (data[0] === 1 || data[0] === 2) term.write(body);
    else if (data[0] === 3) {
      const end = JSON.parse(new TextDecoder().decode(body));
      state.textContent = end.error !== undefined ? `ended: ${end.error}` : `exited with code ${end.exitCode}`;
    }
  };
  socket.onclose = (e) => {
    if (!state.textContent.startsWith("exited") && !state.textContent.startsWith("ended")) state.textContent = `closed${e.reason ? `: ${e.reason}` : ""}`;
  };
  socket.onerror = () => (state.textContent = "could not connect");
  term.onData((d) => send(0, encoder.encode(d)));
  term.onResize(resize);
  new ResizeObserver(() => fit.fit()).observe(box);
});
