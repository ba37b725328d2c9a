// app.js: the page's entry point: the API token, routing between the fleet
// overview and a session, and the fleet overview itself.
//
// Routing lives in the URL fragment (#session=ID), so the back button
// leaves a session (and detaches) and a link can open one. The fragment
// may also carry #token=..., which is moved to sessionStorage (this tab
// only) and removed from the address bar at once; a fragment never
// reaches the server or a Referer header.
"use strict";

const FLEET_POLL_MS = 2000;
const TOKEN_KEY = "fak.token";
const NAME_KEY = "fak.clientName";

const app = {
  token: sessionStorage.getItem(TOKEN_KEY) || "",
  session: null,     // the open SessionView
  fleetGen: 0,       // bumped to stop the fleet poll
  nodeName: "",
};

// --- calls ----------------------------------------------------------------

function rpc(method, msg, opts = {}) {
  return Connect.unary(method, msg, { ...opts, token: app.token }).catch((err) => {
    if (err.code === "unauthenticated") needToken(err);
    throw err;
  });
}

function stream(method, msg, onMessage, opts = {}) {
  return Connect.serverStream(method, msg, onMessage, { ...opts, token: app.token });
}

function clientName() {
  return ($("#client-name").value || "").trim() || "browser";
}

// --- views ----------------------------------------------------------------

function show(view) {
  for (const v of ["token-view", "fleet-view", "session-view"]) $("#" + v).hidden = v !== view;
  document.body.dataset.view = view;
}

function setToken(t) {
  app.token = t;
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function needToken(err) {
  closeSession();
  stopFleet();
  setToken("");
  $("#token-error").textContent = err ? errorText(err) : "";
  show("token-view");
  $("#token-input").focus();
}

// readFragment moves a #token=... into sessionStorage, strips it from the
// address bar (and history) and returns the remaining parameters.
function readFragment() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ""));
  const t = params.get("token");
  if (t !== null) {
    setToken(t.trim());
    params.delete("token");
    const rest = params.toString();
    history.replaceState(history.state, "", location.pathname + location.search + (rest ? "#" + rest : ""));
  }
  return params;
}

function route() {
  const params = readFragment();
  if (!app.token) return needToken(null);
  const id = params.get("session");
  if (id) openSession(id);
  else showFleet();
}

function openSession(id) {
  if (app.session && app.session.id === id && !app.session.closed) return;
  closeSession();
  stopFleet();
  show("session-view");
  app.session = new SessionView(id, { rpc, stream, clientName, onUnauthenticated: needToken });
  app.session.start();
}

// closeSession detaches the open session, if any; the promise settles when
// the detach has been answered.
function closeSession() {
  const done = app.session ? app.session.close() : Promise.resolve();
  app.session = null;
  return done;
}

// --- the fleet overview ----------------------------------------------------

function showFleet() {
  const detached = closeSession();
  show("fleet-view");
  const gen = ++app.fleetGen;
  (async () => {
    // The overview is drawn once the detach has landed, so it does not
    // show this tab still attached.
    await Promise.race([detached, sleep(1000)]);
    while (gen === app.fleetGen) {
      await refreshFleet();
      try { await sleep(FLEET_POLL_MS); } catch (_) { return; }
    }
  })();
}

function stopFleet() {
  app.fleetGen++;
}

async function refreshFleet() {
  const [status, sessions] = await Promise.allSettled([
    rpc("ClusterService/Status", { all: true }, { timeoutMs: 5000 }),
    listSessions(),
  ]);
  const errors = [];
  if (status.status === "fulfilled") renderNodes(status.value.nodes || []);
  else errors.push("nodes: " + errorText(status.reason));
  if (sessions.status === "fulfilled") renderSessions(sessions.value);
  else errors.push("sessions: " + errorText(sessions.reason));
  $("#fleet-error").textContent = errors.join("\n");
  $("#fleet-updated").textContent = "updated " + new Date().toLocaleTimeString();
}

// listSessions pages through every session. The overview is a projection:
// a stale read from this node's replica keeps it working while the fleet
// has no leader.
async function listSessions() {
  const out = [];
  let pageToken = "";
  for (let page = 0; page < 20; page++) {
    const r = await rpc("SessionService/ListSessions", {
      consistency: "READ_CONSISTENCY_STALE", pageSize: 500, pageToken,
    }, { timeoutMs: 5000 });
    out.push(...(r.sessions || []));
    pageToken = r.nextPageToken || "";
    if (!pageToken) break;
  }
  return out;
}

function renderNodes(nodes) {
  const rows = nodes.map((n) => {
    const self = n.apiAddr === location.host;
    if (self) app.nodeName = n.name;
    return el("tr", { "data-node": n.name, class: (self ? "self " : "") + (n.error ? "unreachable" : "") },
      el("td", {}, n.name, self ? el("span", { class: "badge you" }, "this page") : null),
      el("td", {}, n.apiAddr || ""),
      el("td", { class: "state-" + String(n.raftState || "").toLowerCase() }, n.error ? "unreachable" : n.raftState || "?"),
      el("td", { class: "num" }, str(n.term || "0")),
      el("td", {}, n.leaderId || "none"),
      el("td", { class: "num" }, str(n.appliedIndex || "0")),
      el("td", { class: "error" }, n.error || ""));
  });
  $("#node-list tbody").replaceChildren(...rows);
  $("#node-name").textContent = app.nodeName ? "node " + app.nodeName : location.host;
}

// renderSessions updates the table in place, one row per session kept
// across polls, so a click on a row is never lost to a re-render.
function renderSessions(sessions) {
  const body = $("#session-list tbody");
  const old = new Map([...body.querySelectorAll("tr[data-session-id]")].map((r) => [r.dataset.sessionId, r]));
  const now = nowNanos();
  const rows = sessions.map((s) => {
    const p = s.placement || {};
    const l = s.lease;
    const holder = l && u64(l.expiresUnixNano) > now ? clientLabel(l.clientKind, l.clientName) : "";
    const state = enumName(s.state, "SESSION_STATE_");
    let row = old.get(s.sessionId);
    if (!row) {
      row = el("tr", { "data-session-id": s.sessionId, tabindex: "0" },
        el("td", {}, el("a", { href: "#session=" + encodeURIComponent(s.sessionId), class: "session-link" }, s.sessionId)),
        ...Array.from({ length: 6 }, (_, i) => el("td", { class: i >= 3 && i !== 4 ? "num" : "" })));
    }
    row.className = "session-row " + state;
    const cells = [s.title || "", state, str(s.epoch || "0") + " @ " + (p.node || "?"), "#" + str(s.headSeq || "0"),
      holder || "—", str(s.attachmentCount || "0")];
    cells.forEach((text, i) => {
      const td = row.cells[i + 1];
      if (td.textContent !== text) td.textContent = text;
    });
    return row;
  });
  if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: "7", class: "empty" }, "No sessions yet.")));
  // Rows already in place are not touched; only new or reordered ones move.
  const keep = new Set(rows);
  for (const r of [...body.children]) if (!keep.has(r)) r.remove();
  rows.forEach((r, i) => {
    if (body.children[i] !== r) body.insertBefore(r, body.children[i] || null);
  });
}

// --- the conformance hook ----------------------------------------------------

// window.fakConformance is the page's side of the client conformance
// fixture (client/conformance; e2e/witness's TestConformPage).
// render(descriptor, attachmentId) shows a DescribeSessionResponse (its
// proto JSON) in the session view exactly as a describe answer would be
// shown, as attachmentId sees it, and returns presentedControls(). It
// holds no fleet: every call the view would make fails at once, so
// nothing leaves the page. controls() reads the controls again.
window.fakConformance = {
  render(d, attachmentId) {
    closeSession();
    stopFleet();
    show("session-view");
    const offline = () => Promise.reject(new Connect.RpcError("unavailable", "conformance preview: no fleet"));
    const id = (d && d.session && d.session.sessionId) || "preview";
    const v = new SessionView(id, { rpc: offline, stream: offline, clientName, onUnauthenticated: () => {} });
    v.attachmentId = attachmentId || "";
    v.view.dataset.attachmentId = v.attachmentId;
    $("#attachment-id").textContent = v.attachmentId || "(none)";
    app.session = v;
    v.applyDescriptor(d);
    return presentedControls();
  },
  controls: presentedControls,
};

// --- wiring ----------------------------------------------------------------

function init() {
  $("#client-name").value = sessionStorage.getItem(NAME_KEY) || "browser";
  $("#client-name").addEventListener("change", () => sessionStorage.setItem(NAME_KEY, clientName()));

  $("#token-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const t = $("#token-input").value.trim();
    if (!t) return;
    $("#token-input").value = "";
    setToken(t);
    route();
  });
  $("#forget-token").addEventListener("click", () => needToken(null));

  // A click anywhere on a session row opens it (the id is also a link).
  $("#session-list").addEventListener("click", (e) => {
    const row = e.target.closest("tr[data-session-id]");
    if (row && !e.target.closest("a")) location.hash = "session=" + encodeURIComponent(row.dataset.sessionId);
  });
  $("#session-list").addEventListener("keydown", (e) => {
    const row = e.target.closest("tr[data-session-id]");
    if (row && e.key === "Enter") location.hash = "session=" + encodeURIComponent(row.dataset.sessionId);
  });

  $("#create-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const title = $("#create-title").value.trim();
    try {
      const r = await rpc("SessionService/CreateSession", { title, objective: $("#create-objective").value.trim() });
      $("#create-title").value = $("#create-objective").value = "";
      location.hash = "session=" + encodeURIComponent(r.session.sessionId);
    } catch (err) {
      $("#fleet-error").textContent = errorText(err);
    }
  });

  $("#input-form").addEventListener("submit", (e) => {
    e.preventDefault();
    if (app.session) app.session.sendInput($("#input-text").value);
  });
  // Enter sends, Shift+Enter starts a new line, as in chat clients.
  $("#input-text").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $("#input-form").requestSubmit();
    }
  });
  $("#load-earlier").addEventListener("click", () => app.session && app.session.loadEarlier());

  window.addEventListener("hashchange", route);
  // Leaving the page detaches (a keepalive fetch outlives the page); a page
  // restored from the back-forward cache attaches again.
  window.addEventListener("pagehide", () => closeSession());
  window.addEventListener("pageshow", (e) => { if (e.persisted) route(); });

  route();
}

init();
