// rackflow console: the live run page and its controls. No framework: a
// server-sent-event stream replaces the page's live part on every change
// (no polling, no reload); a control asks for confirmation, then POSTs with
// the phase the operator saw.
"use strict";

function localTimes(root) {
  for (const t of root.querySelectorAll("time[datetime]")) {
    const d = new Date(t.getAttribute("datetime"));
    if (!isNaN(d)) t.textContent = d.toLocaleString();
  }
}

function showError(text) {
  const box = document.getElementById("control-error");
  if (!box) return;
  box.textContent = text;
  box.hidden = !text;
}

// Asks the button's question, POSTs `url`, and hands a success's text to
// `done`; a refusal's text is shown and the button enabled again.
async function confirmedPost(button, label, url, done) {
  const question = button.getAttribute("data-confirm");
  if (question && !window.confirm(question)) return;
  button.disabled = true;
  try {
    const answer = await fetch(url, { method: "POST" });
    const text = await answer.text();
    if (answer.ok) {
      showError("");
      done(text);
    } else {
      showError(`${label} refused: ${text}`);
      button.disabled = false;
    }
  } catch (e) {
    showError(`${label} failed: ${e}`);
    button.disabled = false;
  }
}

function control(live, button) {
  const action = button.getAttribute("data-action");
  const params = new URLSearchParams();
  const expected = button.getAttribute("data-expected-phase");
  if (action === "advance" && expected !== null) params.set("expected_phase", expected);
  if (action === "cancel") params.set("reason", "cancelled from the console");
  confirmedPost(button, action, `/runs/${live.dataset.run}/${action}?${params}`, (html) => {
    live.innerHTML = html;
    localTimes(live);
  });
}

function follow(live) {
  const events = new EventSource(live.dataset.events);
  events.addEventListener("run", (e) => {
    live.innerHTML = e.data;
    localTimes(live);
  });
  // The stream ends after the run's terminal state; do not reconnect then.
  events.onerror = () => {
    const summary = live.querySelector(".summary");
    const status = summary && summary.dataset.status;
    if (["completed", "completed_with_failures", "failed", "cancelled"].includes(status)) events.close();
  };
  live.addEventListener("click", (e) => {
    const button = e.target.closest("button[data-action]");
    if (button && !button.disabled) control(live, button);
  });
}

// Schedules page: pause / resume / trigger, then the table re-reads.
function scheduleControl(button) {
  const row = button.closest("tr[data-schedule]");
  const action = button.getAttribute("data-schedule-action");
  confirmedPost(button, action, `/schedules/${row.dataset.schedule}/${action}`, async (text) => {
    // The page's content re-read in place (no reload), with the outcome.
    const page = await (await fetch("/schedules")).text();
    const fresh = new DOMParser().parseFromString(page, "text/html").querySelector("main");
    const main = document.querySelector("main");
    if (fresh && main) {
      main.replaceWith(fresh);
      localTimes(fresh);
    }
    const status = document.getElementById("control-status");
    if (status) status.textContent = text;
  });
}

document.addEventListener("DOMContentLoaded", () => {
  localTimes(document);
  const live = document.getElementById("live");
  if (live) follow(live);
  document.addEventListener("click", (e) => {
    const button = e.target.closest("button[data-schedule-action]");
    if (button && !button.disabled) scheduleControl(button);
  });
});
