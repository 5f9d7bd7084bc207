"use strict";
// The operator console. Every value shown comes from the ledger and may hold text a caller
// chose: it is only ever set as textContent, never parsed as HTML.
//
// Nothing is shown without an API key the gateway knows: before one is entered, or with an
// unknown one, every list is hidden and its count is "–" (never an empty list, which would
// tell an operator that nothing needs them), and changing the key clears everything the
// previous key read (the open key, answers, approvals).
const $ = (id) => document.getElementById(id);
const keyInput = $("api-key");
const state = {holder: null, openKey: "", shownRows: "", kinds: new Set(), alerts: []};

async function api(method, path, body) {
  const headers = {"Authorization": "Bearer " + keyInUse};  // the key in use, not one half typed
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {method, headers,
    body: body === undefined ? undefined : JSON.stringify(body)});
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    const detail = data && data.detail;
    const text = typeof detail === "string" ? detail : JSON.stringify(detail);
    const error = new Error(response.status === 401
      ? "this API key is not known (401): nothing is shown" : text);
    error.status = response.status;
    throw error;
  }
  return data;
}

// Times: relative ("3 min ago") and ISO 8601 UTC, never raw epoch milliseconds.
function iso(ms, withMs) {
  const text = new Date(ms).toISOString();
  return (withMs ? text : text.slice(0, 19) + "Z");
}
function ago(ms) {
  const s = Math.round((Date.now() - ms) / 1000), future = s < 0, a = Math.abs(s);
  const text = a < 5 ? "just now" : a < 90 ? a + " s" : a < 5400 ? Math.round(a / 60) + " min"
    : a < 129600 ? Math.round(a / 3600) + " h" : Math.round(a / 86400) + " days";
  return a < 5 ? text : future ? "in " + text : text + " ago";
}
function when(ms, withMs) {
  const node = document.createElement("time");
  node.className = "when";
  if (ms == null) { node.textContent = "-"; return node; }
  node.dateTime = iso(ms, true);
  const rel = document.createElement("span"), abs = document.createElement("span");
  rel.className = "rel"; rel.textContent = ago(ms);
  abs.className = "iso"; abs.textContent = iso(ms, withMs);
  node.append(rel, " ", abs);
  return node;
}
// Epoch milliseconds inside a record's detail ("not before 1765…") read as ISO times.
function humanDetail(text) {
  return text == null ? text : String(text).replace(/\b1\d{12}\b/g, (ms) => iso(Number(ms), true));
}

function cell(content, className) {
  const td = document.createElement("td");
  if (className) td.className = className;
  if (content instanceof Node) td.appendChild(content);
  else td.textContent = content == null ? "-" : String(content);
  return td;
}
function row(cells, classes) {
  const tr = document.createElement("tr");
  cells.forEach((c, i) => tr.appendChild(cell(c, classes && classes[i])));
  return tr;
}
function say(id, text, isError) { $(id).textContent = text; $(id).className = isError ? "error" : "muted"; }
function count(of, n) {
  for (const badge of document.querySelectorAll(`.count[data-of="${of}"]`)) {
    badge.textContent = n == null ? "–" : String(n);
    badge.classList.toggle("attention", !!n && of !== "containment");
  }
}
const isOperator = () => !!(state.holder && state.holder.operator);

// ---- the API key -------------------------------------------------------------------

function forget() {
  state.holder = null; state.openKey = ""; state.shownRows = ""; state.alerts = [];
  shownQueue = shownApprovals = shownFreezes = null;
  document.body.classList.remove("authorized");
  $("auth-needed").hidden = false;
  for (const id of ["reconciliation", "alerts", "containment", "approvals"]) {
    document.querySelector(`#${id} tbody`).textContent = ""; count(id, null);
  }
  for (const id of ["reconciliation-empty", "freezes-empty", "approvals-empty", "alerts-empty",
    "timeline", "picture", "approval-result"]) $(id).hidden = true;
  for (const id of ["decision", "approval-status", "containment-result", "holder", "live"]) $(id).textContent = "";
  $("timeline").querySelector("tbody").textContent = ""; $("picture").textContent = "";
  $("alert-kinds").textContent = ""; $("approval-result").textContent = "";
  $("key").value = ""; $("key").placeholder = "tenant/action/business-id";
  for (const b of document.querySelectorAll("#freeze-form button, #freeze-form input")) b.disabled = true;
  say("operation", "Open a key to see its state, its history as a picture, and every record of it.");
}

// A key entered again (a change event on blur, "Use key" twice) keeps what it shows.
let keyInUse = null;
async function useKey() {
  if (keyInput.value === keyInUse && state.holder) return;
  keyInUse = keyInput.value;
  sessionStorage.setItem("ledger-api-key", keyInput.value);
  forget();
  if (!keyInput.value) {
    $("auth-needed").textContent = "Enter an API key above: nothing is read from the ledger, "
      + "and nothing is shown, without one.";
    say("status", "enter an API key: nothing is shown without one", true);
    return;
  }
  const key = keyInUse;
  let holder;
  try {
    holder = await api("GET", "/v1/whoami");
  } catch (error) {
    if (key !== keyInUse) return;  // another key was entered meanwhile
    $("auth-needed").textContent = error.status === 401 ? "This API key is not known to the "
      + "gateway: nothing is read or shown. Check the key and enter it again." : error.message;
    say("status", error.message, true);
    return;
  }
  if (key !== keyInUse) return;
  state.holder = holder;
  $("holder").textContent = state.holder.tenant + " · " + (isOperator()
    ? "operator " + state.holder.operator : "agent key (read only)");
  $("key").placeholder = state.holder.tenant + "/action/business-id";
  document.body.classList.add("authorized");
  $("auth-needed").hidden = true;
  document.body.classList.toggle("operator", isOperator());
  for (const b of document.querySelectorAll("#freeze-form button, #freeze-form input")) b.disabled = !isOperator();
  await refresh();
}

keyInput.value = sessionStorage.getItem("ledger-api-key") || "";
$("key-form").addEventListener("submit", (event) => { event.preventDefault(); useKey(); });
keyInput.addEventListener("change", useKey);

// ---- refresh: every list, and the open key, every 5 s --------------------------------

// One refresh at a time per key (a slow read never piles up polls). Each loader checks
// that the key it read with is still the one in use before it shows anything.
let refreshing = null;
async function refresh() {
  const holder = state.holder;
  if (!holder || refreshing === holder) return;
  refreshing = holder;
  try {
    await Promise.all([loadQueue(holder), loadAlerts(holder), loadFreezes(holder),
      loadApprovals(holder), loadOpenKey(holder)]);
    if (state.holder === holder) say("status", "up to date " + iso(Date.now()));
  } catch (error) {
    if (state.holder !== holder) return;
    if (error.status === 401) { forget(); $("auth-needed").textContent = error.message; }
    say("status", error.message, true);
  } finally { if (refreshing === holder) refreshing = null; }
}
function refreshTimes(root) {
  for (const t of root.querySelectorAll("time.when[datetime]")) {
    t.querySelector(".rel").textContent = ago(Date.parse(t.dateTime));
  }
}
// After every script of the page ran (the lists and the open key are in their own files).
window.addEventListener("DOMContentLoaded", () => { useKey(); setInterval(refresh, 5000); });
