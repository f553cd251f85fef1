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

async function control(live, button) {
  const question = button.getAttribute("data-confirm");
  if (question && !window.confirm(question)) return;
  const action = button.getAttribute("data-action");
  const params = new URLSearchParams();
  const expected = button.getAttribute("data-expected-phase");
  if (action === "advance" && expected !== null) params.set("expected_phase", expected);
  if (action === "cancel") params.set("reason", "cancelled from the console");
  button.disabled = true;
  try {
    const answer = await fetch(`/runs/${live.dataset.run}/${action}?${params}`, { method: "POST" });
    const text = await answer.text();
    if (answer.ok) {
      live.innerHTML = text;
      localTimes(live);
      showError("");
    } else {
      showError(`${action} refused: ${text}`);
      button.disabled = false;
    }
  } catch (e) {
    showError(`${action} failed: ${e}`);
    button.disabled = false;
  }
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

// Schedules page: pause / resume / trigger, then the page re-reads.
async function scheduleControl(button) {
  const question = button.getAttribute("data-confirm");
  if (question && !window.confirm(question)) return;
  const row = button.closest("tr[data-schedule]");
  const action = button.getAttribute("data-schedule-action");
  button.disabled = true;
  try {
    const answer = await fetch(`/schedules/${row.dataset.schedule}/${action}`, { method: "POST" });
    const text = await answer.text();
    if (answer.ok) {
      window.location.reload();
    } else {
      showError(`${action} refused: ${text}`);
      button.disabled = false;
    }
  } catch (e) {
    showError(`${action} failed: ${e}`);
    button.disabled = false;
  }
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
