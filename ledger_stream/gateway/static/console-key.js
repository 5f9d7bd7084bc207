"use strict";
// The open key: its state, its history as a picture (keypicture.js) and its records as a
// table, read again on every refresh (live: a new record appears without a click).

$("search-form").addEventListener("submit", (event) => {
  event.preventDefault();
  state.openKey = $("key").value.trim();
  state.shownRows = "";
  $("timeline").hidden = true; $("picture").hidden = true; $("live").textContent = "";
  if (!state.holder) { say("operation", "enter an API key first: nothing is read without one", true); return; }
  if (!state.openKey) { say("operation", "name a key: tenant/action/business-id", true); return; }
  say("operation", "reading " + state.openKey + "…");
  loadOpenKey(state.holder).catch((error) => { forget(); say("status", error.message, true); });
});

async function loadOpenKey(holder) {
  const key = state.openKey;
  if (!key) return;
  const path = encodeURIComponent(key);
  // A key with records but no receipt yet (404 from operations) still shows its history.
  const [op, rows] = await Promise.allSettled([api("GET", "/v1/operations/" + path),
    api("GET", "/v1/timeline/" + path)]);
  if (holder !== state.holder || key !== state.openKey) return;
  const failed = [op, rows].find((r) => r.status === "rejected" && r.reason.status !== 404);
  if (failed && failed.reason.status === 401) throw failed.reason;
  if (failed || rows.status === "rejected") {  // 403 another tenant's, 404 no record
    say("operation", (failed || rows).reason.message, true);
    $("timeline").hidden = true; $("picture").hidden = true; state.shownRows = "";
    return;
  }
  showOperation(key, op.status === "fulfilled" ? op.value : null, rows.value);
  const shown = JSON.stringify(rows.value);
  $("live").textContent = "live: read " + iso(Date.now()) + ", " + rows.value.length + " records";
  if (shown === state.shownRows) { refreshTimes($("timeline")); return; }
  state.shownRows = shown;
  showTimeline(rows.value);
}

function showOperation(key, op, rows) {
  const box = $("operation");
  box.className = ""; box.textContent = "";
  const name = document.createElement("code"), status = document.createElement("span");
  name.textContent = key;
  if (!op) box.append(name, " has no receipt yet: the ledger has not answered its intent");
  else {
    status.className = "state"; status.id = "key-state"; status.textContent = op.key_status;
    box.append(name, " is ", status, op.resolved ? " (settled)" : " (not settled yet)",
      op.external_id ? ", external id " + op.external_id : "",
      op.attempts ? ", " + op.attempts + " attempt(s)" : "", "; last receipt ", when(op.at_ms));
  }
  flagged(box, rows);
}

// The key's observed-step flags (GET /v1/timeline's ``flag``, as `inspect` shows them): a
// re-run (a replay, a fork, a resume) whose step read something else from a source than the
// thread's first run did. A mark for the review, never a reason the ledger refused anything.
function flagged(box, rows) {
  const count = rows.filter((r) => r.flag).length;
  if (!count) return;
  const line = document.createElement("p"), badge = document.createElement("b");
  line.className = "flag";
  badge.textContent = "flagged";
  line.append(badge, " " + count + " intent(s) of a re-run read something else than the "
    + "thread's first run (observation changed): see the rows marked below");
  box.appendChild(line);
}

// The detail cell: the record's detail, and for an intent what its step observed and the
// flag of a re-run that observed something else.
function detailCell(r) {
  const detail = humanDetail(r.detail);
  if (!r.observed && !r.flag) return detail;
  const box = document.createElement("div");
  if (detail) box.append(detail);
  if (r.observed) {
    const line = document.createElement("div");
    line.className = "observed"; line.textContent = "observed " + r.observed;
    box.appendChild(line);
  }
  if (r.flag) {
    const line = document.createElement("div"), badge = document.createElement("b");
    line.className = "flag"; badge.textContent = "FLAGGED";
    line.append(badge, " " + r.flag);
    box.appendChild(line);
  }
  return box;
}

function showTimeline(rows) {
  const picture = $("picture"), tbody = $("timeline").querySelector("tbody");
  picture.hidden = false;
  keyPicture.draw(picture, rows, pick);
  tbody.textContent = "";
  rows.forEach((r, i) => {
    const tr = row([when(r.ledger_time_ms, true), keyPicture.LANES[keyPicture.laneOf(r)].split(" ")[0],
      r.event, r.role + " " + r.partition + "@" + r.offset, r.attempt, r.outcome || r.receipt,
      r.next_state, r.external_id, detailCell(r)], ["nowrap", "nowrap", "nowrap", "nowrap"]);
    tr.dataset.index = String(i);
    if (r.flag) tr.classList.add("flagged");
    tr.addEventListener("click", () => pick(i));
    tbody.appendChild(tr);
  });
  $("timeline").hidden = false;
}

// A mark and its row, picked together.
function pick(i) {
  for (const node of document.querySelectorAll("#picture .picked, #timeline .picked")) node.classList.remove("picked");
  const mark = document.querySelector(`#picture .mark[data-index="${i}"]`);
  const tr = document.querySelector(`#timeline tr[data-index="${i}"]`);
  if (mark) mark.classList.add("picked");
  if (tr) { tr.classList.add("picked"); tr.scrollIntoView({block: "nearest"}); }
}

// The picture spreads its marks over the width it has: drawn again when that changes.
let drawnWidth = 0;
window.addEventListener("resize", () => {
  const width = $("picture").clientWidth;
  if (!state.shownRows || width === drawnWidth) return;
  drawnWidth = width;
  keyPicture.draw($("picture"), JSON.parse(state.shownRows), pick);
});
