// fleet.js: the fleet page. Every POLL_MS it reads ClusterService/Overview
// (every page of sessions, up to MAX_PAGES) and redraws the nodes and the
// sessions. Reads are linearizable; when that fails (no leader) it falls
// back to this node's replica and says so, so the page still shows what is
// known during an outage.
"use strict";

const POLL_MS = 2000;
const PAGE_SIZE = 500;
const MAX_PAGES = 20;
const TOKEN_KEY = "fak.token"; // shared with the sessions page (app.js)

let token = sessionStorage.getItem(TOKEN_KEY) || "";
let pollGen = 0;

function setToken(t) {
  token = t;
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function showView(id) {
  for (const v of ["token-view", "overview-view"]) $("#" + v).hidden = v !== id;
}

function needToken(err) {
  pollGen++;
  setToken("");
  $("#token-error").textContent = err ? errorText(err) : "";
  showView("token-view");
  $("#token-input").focus();
}

// fetchOverview reads every page into one answer: the first page's nodes
// and counts, every page's sessions.
async function fetchOverview(stale) {
  const req = { pageSize: PAGE_SIZE, includeStopped: $("#include-stopped").checked };
  if (stale) req.consistency = "READ_CONSISTENCY_STALE";
  let out = null;
  for (let page = 0; page < MAX_PAGES; page++) {
    const r = await Connect.unary("ClusterService/Overview", req, { token, timeoutMs: 5000 });
    if (!out) out = r;
    else out.sessions = (out.sessions || []).concat(r.sessions || []);
    out.nextPageToken = r.nextPageToken || "";
    if (!out.nextPageToken) break;
    req.pageToken = out.nextPageToken;
  }
  return out;
}

async function refresh() {
  let ov, note = "";
  try {
    ov = await fetchOverview(false);
  } catch (err) {
    if (err.code === "unauthenticated") return needToken(err);
    try {
      ov = await fetchOverview(true);
      note = "linearizable read failed (" + errorText(err) + "): showing this node's replica";
    } catch (err2) {
      if (err2.code === "unauthenticated") return needToken(err2);
      $("#fleet-error").textContent = errorText(err2);
      return;
    }
  }
  $("#fleet-error").textContent = note;
  render(ov);
}

function render(ov) {
  const nodes = ov.nodes || [];
  const alive = nodes.filter((n) => n.gossipStatus === "alive").length;
  $("#fleet-summary").textContent = "Leader " + (ov.leader || "none") + " · " + nodes.length + " nodes (" + alive +
    " alive) · sessions: " + (ov.sessionsActive || 0) + " active, " + (ov.sessionsStopped || 0) + " stopped · moves open: " +
    (ov.movesOpen || 0) + " · applied index " + str(ov.appliedIndex || "0");
  $("#fleet-updated").textContent = "updated " + (ov.generatedUnixNano ? nanosToDate(ov.generatedUnixNano) : new Date()).toLocaleTimeString();
  renderNodes(nodes);
  renderSessions(ov.sessions || []);
  const more = $("#fleet-truncated");
  more.hidden = !ov.nextPageToken;
  more.textContent = "Showing the first " + (ov.sessions || []).length + " sessions.";
}

function renderNodes(nodes) {
  const rows = nodes.map((n) => {
    const self = n.apiAddr === location.host;
    if (self) $("#node-name").textContent = "fleet via " + n.name;
    const failed = Boolean(n.error);
    return el("tr", { "data-node": n.name, class: (self ? "self " : "") + (failed ? "unreachable" : "") },
      el("td", {}, n.name, n.leader ? el("span", { class: "badge" }, "leader") : null,
        self ? el("span", { class: "badge you" }, "this page") : null),
      el("td", {}, n.gossipStatus || ""),
      el("td", { class: "state-" + (n.raftRole || "") }, n.raftRole || ""),
      el("td", { class: "num" }, failed ? "" : str(n.appliedIndex || "0")),
      el("td", { class: "num" }, failed ? "" : str(n.appliedLag || "0")),
      el("td", { class: "num" }, str(n.sessionsHosted || 0)),
      el("td", { class: "num" }, n.capacity ? str(n.capacity) : "unlimited"),
      el("td", {}, n.draining ? "draining" : ""),
      el("td", {}, (n.labels || []).map((l) => l.key + "=" + l.value).join(", ")),
      el("td", { class: "error" }, n.error || ""));
  });
  if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: "10", class: "empty" }, "No nodes known.")));
  $("#fleet-nodes tbody").replaceChildren(...rows);
}

// budgetText lists what remains on the limited axes; none is unlimited.
function budgetText(b) {
  if (!b) return "unlimited";
  const parts = [];
  const add = (name, v, fmt) => { if (u64(v) > 0n) parts.push(name + " " + fmt(v)); };
  add("turns", b.turns, str);
  add("input", b.inputTokens, str);
  add("tokens", b.outputTokens, str);
  add("queries", b.queries, str);
  add("spend", b.spendMicros, (v) => String(Number(u64(v)) / 1e6));
  add("tools", b.toolCalls, str);
  return parts.length ? parts.join(", ") : "exhausted";
}

function renderSessions(sessions) {
  const rows = sessions.map((s) => {
    const state = enumName(s.state, "SESSION_STATE_");
    return el("tr", { "data-session-id": s.sessionId, class: "session-row " + state },
      el("td", {}, el("a", { href: "./#session=" + encodeURIComponent(s.sessionId) }, s.sessionId)),
      el("td", {}, s.title || ""),
      el("td", {}, state, s.stranded ? el("span", { class: "badge" }, "stranded") : null),
      el("td", {}, s.node || ""),
      el("td", { class: "num" }, str(s.epoch || "0")),
      el("td", {}, s.leaseHolderLabel || s.leaseHolder || ""),
      el("td", {}, s.openMove ? moveText(s.openMove) : ""),
      el("td", { class: "num" }, "#" + str(s.headSeq || "0")),
      el("td", {}, budgetText(s.budgetRemaining)));
  });
  if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: "9", class: "empty" }, "No sessions.")));
  $("#fleet-sessions tbody").replaceChildren(...rows);
}

function start() {
  showView("overview-view");
  const gen = ++pollGen;
  (async () => {
    while (gen === pollGen) {
      await refresh();
      await sleep(POLL_MS);
    }
  })();
}

function init() {
  // A #token=... fragment is taken and removed from the address bar, as on
  // the sessions page.
  const params = new URLSearchParams(location.hash.replace(/^#/, ""));
  if (params.get("token") !== null) {
    setToken(params.get("token").trim());
    history.replaceState(history.state, "", location.pathname + location.search);
  }
  $("#token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const t = $("#token-input").value.trim();
    if (!t) return;
    $("#token-input").value = "";
    setToken(t);
    start();
  });
  $("#include-stopped").addEventListener("change", () => { if (token) refresh(); });
  if (token) start();
  else needToken(null);
}

init();
