// The web console's shared script (docs/web-console.md). No inline scripts anywhere: the
// Content-Security-Policy forbids them. Pages work without it; it only adds conveniences.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  // <select data-autosubmit> submits its form on change (the instance picker of the logs page).
  for (const el of document.querySelectorAll("select[data-autosubmit]")) {
    el.addEventListener("change", () => el.form && el.form.submit());
  }
});
