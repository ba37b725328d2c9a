// ui.js: small DOM and formatting helpers shared by the page's views.
//
// Everything the server sends is put into the page as text (textContent),
// never as HTML: titles, inputs and agent output are untrusted.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);

// el builds an element: attributes (class, dataset via data-*, on* handlers,
// boolean properties) and children (strings become text nodes).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") e.addEventListener(k.slice(2), v);
    else if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

// Proto3 JSON omits fields at their default value: a missing uint64 is 0,
// a missing bool false, a missing list empty.
const u64 = (v) => BigInt(v || 0);
const str = (v) => (v === undefined || v === null ? "" : String(v));

// enumName turns SESSION_STATE_ACTIVE into "active".
function enumName(v, prefix) {
  if (!v) return "unspecified";
  return String(v).replace(prefix, "").toLowerCase();
}

function nanosToDate(ns) {
  return new Date(Number(u64(ns) / 1000000n));
}

function fmtTime(ns) {
  if (!ns || ns === "0") return "";
  return nanosToDate(ns).toLocaleTimeString();
}

// fmtIn says how far a nanosecond deadline is from now, by this browser's
// clock: a hint for people, never a decision (the FSM decides).
function fmtIn(ns) {
  const ms = Number(u64(ns) / 1000000n) - Date.now();
  if (ms <= 0) return "expired";
  return "in " + Math.ceil(ms / 1000) + "s";
}

function nowNanos() {
  return BigInt(Date.now()) * 1000000n;
}

// clientLabel names a client as "terminal alice"; a browser left at its
// default name is just "browser", not "browser browser".
function clientLabel(kind, name) {
  if (name && name === kind) return kind;
  return [kind, name].filter(Boolean).join(" ");
}

// eventData decodes an event's data (proto bytes, so base64 in JSON) as the
// JSON object fak's writers put there; anything else is returned as text.
function eventData(ev) {
  if (!ev.data) return null;
  let text;
  try {
    text = new TextDecoder().decode(Connect.base64Bytes(ev.data));
  } catch (_) {
    return null;
  }
  try {
    return JSON.parse(text);
  } catch (_) {
    return text;
  }
}

// sleep resolves after ms, or rejects at once when signal aborts.
function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal && signal.aborted) return reject(signal.reason);
    const t = setTimeout(resolve, ms);
    if (signal) signal.addEventListener("abort", () => { clearTimeout(t); reject(signal.reason); }, { once: true });
  });
}

// newRequestID makes an idempotency key for a write.
function newRequestID() {
  const b = crypto.getRandomValues(new Uint8Array(12));
  return "web_" + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

// moveText says where a move goes and how far it is: "mov_… CHECKPOINTED:
// n1 → n2 (in progress)", "… MOVE_FAILED: n1 → n2: reason".
function moveText(m) {
  const to = (m.admitted && m.admitted.node) || (m.target && m.target.node) || "least loaded node";
  const ended = ["CUTOVER_COMMITTED", "MOVE_FAILED", "MOVE_UNSAFE"].includes(m.state);
  return (m.moveId || "") + " " + (m.state || "") + ": " + (m.sourceNode || "?") + " → " + to +
    (m.reason ? ": " + m.reason : "") + (ended ? "" : " (in progress)");
}

function errorText(err) {
  if (err instanceof Connect.RpcError) return err.toString();
  return String(err && err.message || err);
}
