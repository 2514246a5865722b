// The logs page's live view (docs/web-console.md, "Logs"): reads the server-sent event stream,
// one GET /api/podgroups/logs record per event, and shows the lines; filter, pause, keep the
// newest 5,000 lines. Lines are set as text, never as HTML.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const box = document.getElementById("log");
  const filterBox = document.getElementById("log-filter");
  const pauseButton = document.getElementById("log-pause");
  const state = document.getElementById("log-state");
  if (!box) return;
  const maxLines = 5000;
  let paused = false;
  let held = [];
  let needle = "";

  const matches = (el) => needle === "" || el.dataset.text.toLowerCase().includes(needle);
  const atBottom = () => box.scrollHeight - box.scrollTop - box.clientHeight < 40;

  function render(record) {
    const row = document.createElement("div");
    const prefix = document.createElement("span");
    prefix.className = "prefix";
    prefix.textContent = `${record.instance}@${record.node} ${record.time ? record.time.slice(11, 23) + " " : ""}`;
    row.appendChild(prefix);
    const text = document.createElement("span");
    if (record.error !== undefined) {
      row.className = "fail";
      text.textContent = `(${record.error})`;
    } else {
      if (record.stream === "stderr") row.className = "stderr";
      text.textContent = record.line;
    }
    row.appendChild(text);
    row.dataset.text = text.textContent;
    row.hidden = !matches(row);
    return row;
  }

  function show(records) {
    const follow = atBottom();
    const frag = document.createDocumentFragment();
    for (const r of records) frag.appendChild(render(r));
    box.appendChild(frag);
    while (box.childElementCount > maxLines) box.firstElementChild.remove();
    if (follow) box.scrollTop = box.scrollHeight;
  }

  const source = new EventSource(box.dataset.stream);
  let opened = false;
  source.onopen = () => {
    // A reconnect starts the stream again from its tail: start the view again too, no repeats.
    if (opened) {
      box.replaceChildren();
      held = [];
    }
    opened = true;
    state.textContent = paused ? "paused" : "live";
  };
  source.onmessage = (e) => {
    const record = JSON.parse(e.data);
    if (paused) held.push(record);
    else show([record]);
  };
  source.addEventListener("end", () => {
    state.textContent = "ended";
    source.close();
  });
  source.addEventListener("failure", (e) => {
    state.textContent = `failed: ${JSON.parse(e.data).message}`;
    source.close();
  });
  source.onerror = () => {
    // CLOSED: the server refused the stream (a session that ended answers the sign-in page).
    state.textContent = source.readyState === EventSource.CLOSED ? "ended; reload the page" : "reconnecting";
  };

  filterBox?.addEventListener("input", () => {
    needle = filterBox.value.toLowerCase();
    for (const row of box.children) row.hidden = !matches(row);
  });
  pauseButton?.addEventListener("click", () => {
    paused = !paused;
    pauseButton.textContent = paused ? "Resume" : "Pause";
    state.textContent = paused ? "paused" : "live";
    if (!paused) {
      show(held);
      held = [];
    }
  });
});
