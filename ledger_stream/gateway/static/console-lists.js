"use strict";
// The console's lists: the reconciliation queue (with its decision form), pending
// approvals (with the approve form), freezes (with the freeze form) and alerts (with
// filters by kind). A list is rebuilt only when what it holds changed, so that a form an
// operator is filling in survives the 5 s refresh; relative times are updated in place.
let shownQueue = null, shownApprovals = null, shownFreezes = null;

// ---- waiting for an operator ---------------------------------------------------------

async function loadQueue(holder) {
  const ops = await api("GET", "/v1/reconciliation");
  if (holder !== state.holder) return;
  const tbody = document.querySelector("#reconciliation tbody");
  count("reconciliation", ops.length);
  $("reconciliation-empty").hidden = ops.length > 0;
  const shown = JSON.stringify(ops.map((o) => [o.key, o.attempts, o.at_ms, o.detail]));
  if (shown === shownQueue) { refreshTimes(tbody); return; }
  shownQueue = shown;
  const open = new Map([...tbody.querySelectorAll("tr.decide-row")].map((f) => [f.dataset.key, f]));
  tbody.textContent = "";
  for (const op of ops) {
    const tr = row([op.key, op.attempts, when(op.at_ms), humanDetail(op.detail), decideButton(op)],
      ["key", "nowrap", "nowrap", "detail", "nowrap"]);
    tr.dataset.key = op.key;
    tbody.appendChild(tr);
    const kept = open.get(op.key);
    if (kept && kept.dataset.attempt === String(op.attempts)) tbody.appendChild(kept);
  }
}

function decideButton(op) {
  const button = document.createElement("button");
  button.className = "decide"; button.type = "button"; button.textContent = "Decide…";
  button.disabled = !isOperator();
  if (!isOperator()) button.title = "an operator's API key records decisions";
  button.addEventListener("click", () => {
    const tr = button.closest("tr"), next = tr.nextElementSibling;
    if (next && next.classList.contains("decide-row")) { next.remove(); return; }
    tr.after(decideForm(op));
    tr.nextElementSibling.querySelector("input").focus();
  });
  return button;
}

// The decision form: a resolution, the target's id (applied), a reason; "not applied"
// re-dispatches the effect, so it asks for a confirmation first.
function decideForm(op) {
  const tr = document.createElement("tr"), td = document.createElement("td");
  tr.className = "decide-row"; tr.dataset.key = op.key; tr.dataset.attempt = String(op.attempts);
  td.colSpan = 5;
  td.appendChild($("decide-template").content.cloneNode(true));
  tr.appendChild(td);
  const form = td.querySelector("form"), confirm = form.querySelector(".confirm");
  const external = form.elements["external_id"];
  form.querySelector(".confirm-key").textContent = op.key;
  form.addEventListener("change", () => {
    external.required = form.elements["resolution"].value === "applied";
    confirm.hidden = true;
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (form.elements["resolution"].value === "not_applied") { confirm.hidden = false; return; }
    decide(op, form);
  });
  form.querySelector(".confirm-yes").addEventListener("click", () => decide(op, form));
  form.querySelector(".confirm-no").addEventListener("click", () => { confirm.hidden = true; });
  form.querySelector(".cancel").addEventListener("click", () => tr.remove());
  return tr;
}

async function decide(op, form) {
  const resolution = form.elements["resolution"].value;
  for (const b of form.querySelectorAll("button")) b.disabled = true;
  try {
    const done = await api("POST", "/v1/reconciliation/" + encodeURIComponent(op.key), {
      resolution, attempt: op.attempts, reason: form.elements["reason"].value.trim(),
      external_id: resolution === "applied" ? form.elements["external_id"].value.trim() : ""});
    say("decision", "recorded: " + op.key + " " + resolution.replace("_", " ")
      + (done.verdict === "applied" ? ", applied by the ledger" : ", not applied by the ledger yet"));
    form.closest("tr").remove();
  } catch (error) {
    say("decision", error.message, true);
    for (const b of form.querySelectorAll("button")) b.disabled = false;
  }
  refresh();
}

// ---- waiting for an approval -----------------------------------------------------------

function approveForm(p) {
  if (!isOperator()) {
    const note = document.createElement("span");
    note.className = "muted"; note.textContent = "an operator's key approves";
    return note;
  }
  const form = document.createElement("form");
  form.className = "approve-form";
  const expires = document.createElement("select");
  expires.name = "expires"; expires.title = "valid for";
  for (const [seconds, label] of [[600, "10 min"], [3600, "1 h"], [86400, "1 day"]]) {
    const option = document.createElement("option");
    option.value = String(seconds); option.textContent = label;
    expires.appendChild(option);
  }
  const button = document.createElement("button");
  button.type = "submit"; button.textContent = "Approve";
  form.append(expires, " ", button);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const approval = await api("POST", "/v1/approvals", {key: p.key, args_hash: p.args_hash,
        expires_in_s: Number(expires.value), policy_revision: p.policy_revision});
      say("approval-status", "approved " + p.key + " (approver key " + approval.key_id
        + ", until " + iso(approval.expires_at_ms) + "): give the agent this approval");
      $("approval-result").textContent = JSON.stringify(approval, null, 2);
      $("approval-result").hidden = false;
    } catch (error) { say("approval-status", error.message, true); }
  });
  return form;
}

async function loadApprovals(holder) {
  const pending = await api("GET", "/v1/approvals");
  if (holder !== state.holder) return;
  const tbody = document.querySelector("#approvals tbody");
  count("approvals", pending.length);
  $("approvals-empty").hidden = pending.length > 0;
  const shown = JSON.stringify(pending);
  if (shown === shownApprovals) { refreshTimes(tbody); return; }  // a chosen expiry stays
  shownApprovals = shown;
  tbody.textContent = "";
  for (const p of pending) {
    const hash = document.createElement("span");
    hash.textContent = p.args_hash.slice(0, 12) + "…"; hash.title = p.args_hash;
    tbody.appendChild(row([p.key, p.action + " → " + p.target, hash, when(p.at_ms), approveForm(p)],
      ["key", "", "", "nowrap", "nowrap"])).dataset.key = p.key;
  }
}

// ---- freezes ----------------------------------------------------------------------------

$("freeze-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const action = $("freeze-action").value.trim(), reason = $("freeze-reason").value.trim();
  if (!action || !reason) { say("containment-result", "name the action and say why", true); return; }
  try {
    const f = await api("POST", "/v1/freezes", {action, reason, mode: $("freeze-mode").value});
    say("containment-result", "frozen: " + f.scope + " (" + f.mode + ")" + (f.in_force ? ", in force"
      : "; not yet applied in partition(s) " + (f.not_applied || []).join(", ")));
    $("freeze-reason").value = "";
  } catch (error) { say("containment-result", error.message, true); }
  refresh();
});

async function unfreeze(f) {
  try {
    await api("DELETE", "/v1/freezes/" + encodeURIComponent(f.action));
    say("containment-result", "unfrozen: " + f.scope + "; its held dispatches are released");
  } catch (error) { say("containment-result", error.message, true); }
  refresh();
}

async function loadFreezes(holder) {
  const freezes = await api("GET", "/v1/freezes");
  if (holder !== state.holder) return;
  const tbody = document.querySelector("#containment tbody");
  count("containment", freezes.length);
  $("freezes-empty").hidden = freezes.length > 0;
  const shown = JSON.stringify(freezes);
  if (shown === shownFreezes) { refreshTimes(tbody); return; }
  shownFreezes = shown;
  tbody.textContent = "";
  for (const f of freezes) {
    let action = f.tenant ? "" : "every tenant: the CLI unfreezes";
    if (f.tenant && isOperator()) {
      action = document.createElement("button");
      action.type = "button"; action.textContent = "Unfreeze";
      action.addEventListener("click", () => unfreeze(f));
    }
    tbody.appendChild(row([f.scope, f.mode, when(f.at_ms), f.operator + ": " + f.reason, action],
      ["key", "nowrap", "nowrap"])).dataset.scope = f.scope;
  }
}

// ---- alerts -----------------------------------------------------------------------------

async function loadAlerts(holder) {
  const alerts = await api("GET", "/v1/alerts?limit=200");
  if (holder !== state.holder) return;
  state.alerts = alerts.slice().sort((a, b) => b.at_ms - a.at_ms
    || b.partition - a.partition || b.offset - a.offset);  // newest first
  count("alerts", alerts.length);
  showAlerts();
}

function showAlerts() {
  const byKind = new Map();
  for (const a of state.alerts) byKind.set(a.kind, (byKind.get(a.kind) || 0) + 1);
  for (const kind of state.kinds) if (!byKind.has(kind)) state.kinds.delete(kind);
  const chips = $("alert-kinds");
  chips.textContent = "";
  const chip = (kind, label, n) => {
    const b = document.createElement("button");
    b.type = "button"; b.dataset.kind = kind; b.textContent = label + " " + n;
    b.setAttribute("aria-pressed", String(kind ? state.kinds.has(kind) : state.kinds.size === 0));
    b.addEventListener("click", () => {
      if (!kind) state.kinds.clear();
      else if (!state.kinds.delete(kind)) state.kinds.add(kind);
      showAlerts();
    });
    chips.appendChild(b);
  };
  chip("", "all", state.alerts.length);
  for (const [kind, n] of [...byKind].sort()) chip(kind, kind.replaceAll("_", " "), n);
  const tbody = document.querySelector("#alerts tbody");
  tbody.textContent = "";
  const shown = state.alerts.filter((a) => state.kinds.size === 0 || state.kinds.has(a.kind));
  for (const a of shown) {
    const head = document.createElement("div"), kind = document.createElement("div");
    kind.className = "kind"; kind.textContent = a.kind;
    head.append(kind, when(a.at_ms));
    const body = document.createElement("div"), key = document.createElement("div");
    key.className = "key"; key.textContent = a.key;
    const detail = document.createElement("div");
    detail.textContent = humanDetail(a.detail);
    body.append(key, detail);
    tbody.appendChild(row([head, body], ["nowrap", ""])).dataset.kind = a.kind;
  }
  $("alerts-empty").hidden = shown.length > 0;
}
