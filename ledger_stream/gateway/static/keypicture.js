"use strict";
// A key's history as a picture, drawn from its timeline rows (GET /v1/timeline/{key}).
//
// Four lanes: the agent (its intents; an operator's decisions and audit records share the
// lane, as the people who ask), the ledger (dispatches, grants, receipts, alerts), the
// connector (its claims) and the target (what the call did there: the outcome, and the
// lookup that looked for the effect). One mark per record, in ledger-time order, evenly
// spaced so that records of one millisecond stay apart; the axis gives the time. An
// unknown outcome is ringed, and a dashed link runs from it to the record that settled
// it (the lookup, or an operator's decision when the lookup could not).
// Text is only ever set as textContent: rows carry text callers chose.
(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const LANES = ["agent · operator", "ledger", "connector", "target"];
  const LANE_H = 40, TOP = 30, LEFT = 140, RIGHT = 40, AXIS = 34;
  const GREEN = "#1a7f37", RED = "#b42318", ORANGE = "#b54708", BLUE = "#2f6fdb",
    GREY = "#8c959f", PURPLE = "#7a3fc0", DARK = "#1d2329";
  const STATE_COLOR = {succeeded: GREEN, failed: RED, needs_reconciliation: ORANGE,
    rejected: "#8a1c1c", held: PURPLE};

  function laneOf(r) {
    if (["Intent", "OperatorResolution", "AuditRecord"].includes(r.event)) return 0;
    if (r.event === "AttemptClaim") return 2;
    if (r.event === "AttemptOutcome" || r.event === "ReconcileResult") return 3;
    return 1;
  }

  // How a record is drawn: its shape, colour and the classes a reader (or a test) finds.
  function look(r) {
    const outcome = r.outcome || "";
    switch (r.event) {
      case "Intent": return {shape: "circle", color: BLUE, cls: "intent"};
      case "OperatorResolution": return {shape: "square", color: PURPLE, cls: "decision"};
      case "AuditRecord": return {shape: "square", color: GREY, cls: "audit", small: true};
      case "AttemptClaim": return {shape: "circle", color: GREY, cls: "claim"};
      case "AttemptOutcome":
        if (outcome === "unknown") return {shape: "circle", color: ORANGE, cls: "outcome unknown"};
        return {shape: "circle", color: outcome === "succeeded" ? GREEN
          : outcome === "not_applied" ? "#d4a72c" : RED, cls: "outcome"};
      case "ReconcileResult": return {shape: "diamond", color: outcome === "lookup found" ? GREEN
        : outcome === "lookup not_found" ? RED : GREY, cls: "lookup"};
      case "Receipt": return {shape: "circle", color: STATE_COLOR[r.next_state] || "#57606a",
        cls: "receipt"};
      case "Alert": return {shape: "triangle", color: ORANGE, cls: "alert"};
      case "DeadLetter": case "undecodable": return {shape: "square", color: DARK, cls: "dead"};
      default: return {shape: "circle", color: GREY, cls: "ledger", small: true};
    }
  }

  function el(name, attrs, text) {
    const node = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function shape(kind, x, y, small) {
    const s = small ? 5 : 7;
    if (kind === "square") return el("rect", {x: x - s, y: y - s, width: 2 * s, height: 2 * s, rx: 2});
    if (kind === "diamond") return el("polygon", {points:
      `${x},${y - s - 2} ${x + s + 2},${y} ${x},${y + s + 2} ${x - s - 2},${y}`});
    if (kind === "triangle") return el("polygon", {points:
      `${x},${y - s - 1} ${x + s + 1},${y + s} ${x - s - 1},${y + s}`});
    return el("circle", {cx: x, cy: y, r: s});
  }

  // The record that settled each unknown outcome: index of unknown → index of settler.
  // A lookup settles unless the receipt after it still needs an operator.
  function settlers(rows) {
    const found = new Map();
    rows.forEach((r, i) => {
      if (r.event !== "AttemptOutcome" || r.outcome !== "unknown") return;
      for (let j = i + 1; j < rows.length; j++) {
        const s = rows[j];
        if (s.attempt !== r.attempt) continue;
        if (s.event === "OperatorResolution") { found.set(i, j); return; }
        if (s.event === "ReconcileResult" && !stillOpen(rows, j)) { found.set(i, j); return; }
      }
    });
    return found;
  }

  function stillOpen(rows, j) {
    const next = rows.slice(j + 1).find((r) => r.event === "Receipt");
    return !!next && next.next_state === "needs_reconciliation";
  }

  function clock(ms) { return new Date(ms).toISOString().slice(11, 23) + "Z"; }

  function axis(svg, rows, xOf, y) {
    const g = el("g", {class: "axis"});
    let lastX = -Infinity, lastT = null;
    rows.forEach((r, i) => {
      const x = xOf(i);
      if (x - lastX < 84 || r.ledger_time_ms === lastT) return;
      lastT = r.ledger_time_ms;
      const dt = r.ledger_time_ms - rows[0].ledger_time_ms;
      const label = i === 0 ? clock(r.ledger_time_ms) : "+" + (dt < 1000 ? dt + " ms"
        : (dt / 1000).toFixed(dt < 10000 ? 2 : 1) + " s");
      g.appendChild(el("text", {x, y, "text-anchor": i === 0 ? "start" : "middle"}, label));
      lastX = x;
    });
    svg.appendChild(g);
  }

  function lanes(svg, width) {
    LANES.forEach((name, lane) => {
      const y = TOP + lane * LANE_H;
      if (lane % 2 === 0) svg.appendChild(el("rect", {class: "lane", x: 0, y, width,
        height: LANE_H}));
      svg.appendChild(el("text", {class: "lane-label", x: 10, y: y + LANE_H / 2 + 4,
        "data-lane": name.split(" ")[0]}, name));
    });
  }

  function link(svg, a, b, text) {
    const lift = Math.min(40, 12 + Math.abs(b.x - a.x) / 6);
    svg.appendChild(el("path", {class: "settles-link", d: `M ${a.x} ${a.y - 9} C ${a.x} `
      + `${a.y - lift}, ${b.x} ${b.y - lift}, ${b.x} ${b.y - 10}`}));
    svg.appendChild(el("text", {class: "note", x: b.x + 10, y: b.y - 12}, text));
  }

  function settledText(r) {
    if (r.event === "OperatorResolution") return "settled by " + (r.outcome || "operator");
    return "settled by " + (r.outcome || "lookup").replace("_", " ");
  }

  // Draws the picture of ``rows`` into ``box`` (replacing what was there); ``onPick(i)``
  // is called when the mark of row i is clicked.
  function draw(box, rows, onPick) {
    box.textContent = "";
    const step = Math.max(30, Math.min(72, (box.clientWidth - LEFT - RIGHT) / Math.max(rows.length, 1)));
    const width = Math.max(box.clientWidth - 2, LEFT + RIGHT + step * rows.length);
    const height = TOP + LANES.length * LANE_H + AXIS;
    const svg = el("svg", {class: "key-picture", width, height, role: "img",
      "aria-label": "the key's records by lane over time"});
    lanes(svg, width);
    const xOf = (i) => LEFT + step * (i + 0.5);
    const at = (i) => ({x: xOf(i), y: TOP + laneOf(rows[i]) * LANE_H + LANE_H / 2});
    rows.forEach((_, i) => svg.appendChild(el("line", {class: "tick", x1: xOf(i), x2: xOf(i),
      y1: TOP, y2: TOP + LANES.length * LANE_H})));
    const settled = settlers(rows);
    rows.forEach((r, i) => {
      const how = look(r), p = at(i);
      const mark = shape(how.shape, p.x, p.y, how.small);
      mark.setAttribute("class", "mark " + how.cls + (r.flag ? " flagged" : ""));
      mark.setAttribute("fill", how.color);
      mark.dataset.index = String(i);
      mark.appendChild(el("title", {}, [clock(r.ledger_time_ms), r.event, r.outcome || r.receipt,
        r.next_state && "→ " + r.next_state, r.detail, r.flag && "FLAGGED " + r.flag]
        .filter(Boolean).join(" · ")));
      mark.addEventListener("click", () => onPick(i));
      svg.appendChild(mark);
      if (how.cls.includes("unknown")) {
        svg.appendChild(el("circle", {class: "unknown-ring", cx: p.x, cy: p.y, r: 11,
          fill: "none", stroke: ORANGE, "stroke-width": 2}));
        svg.appendChild(el("text", {class: "note", x: p.x, y: p.y + 22, "text-anchor": "middle"},
          "unknown"));
      }
      if (r.flag) {  // a re-run that read something else than its thread's first run
        svg.appendChild(el("text", {class: "note flag-note", x: p.x, y: p.y - 14,
          "text-anchor": "middle"}, "observed differently"));
      }
    });
    for (const [i, j] of settled) {
      link(svg, at(i), at(j), settledText(rows[j]));
      svg.querySelector(`.mark[data-index="${j}"]`).classList.add("settles");
    }
    axis(svg, rows, xOf, TOP + LANES.length * LANE_H + 20);
    box.append(svg, legend());
  }

  function legend() {
    const div = document.createElement("div");
    div.className = "legend";
    for (const [color, text] of [[BLUE, "intent"], [GREY, "claim, dispatch"],
      [GREEN, "succeeded / found"], [ORANGE, "unknown / needs an operator"],
      [RED, "failed / not found"], [PURPLE, "operator decision, held"]]) {
      const span = document.createElement("span"), dot = document.createElement("i");
      dot.style.background = color;
      span.append(dot, text);
      div.appendChild(span);
    }
    const note = document.createElement("span");
    note.textContent = "◆ lookup at the target · ▲ alert · dashed: what settled an unknown outcome";
    div.appendChild(note);
    return div;
  }

  window.keyPicture = {draw, laneOf, LANES};
})();
