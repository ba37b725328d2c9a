// session.js: the full attachment to one session, over the same RPCs the
// terminal client uses (DESIGN.md §7): describe, attach, keep alive,
// observe (WatchEvents from an address), act, lease, approvals, detach.
//
// Reconnecting never loses or duplicates an event: the view remembers the
// last applied address, resumes WatchEvents after it, and drops any event
// at or below it. After a reconnect it describes again, and attaches anew
// if its attachment expired meanwhile.
"use strict";

const REPLAY_EVENTS = 50n;       // the transcript starts this many events back
const DESCRIBE_EVERY_MS = 3000;   // presence and lease expiry are not events
const WATCHDOG_MS = 40000;        // the server sends a heartbeat every 15 s
const BACKOFF_MIN_MS = 250;
const BACKOFF_MAX_MS = 5000;

// Controls this page knows how to drive, by capability name. Any other
// control the server advertises is still listed, marked as not supported
// here, so nothing the capability set says is hidden.
const CONTROLS = {
  "input.text": { label: "Send input", id: "input-control" },
  // Interrupting the running turn (the lease holder's): the fleet closes
  // it, naming this tab, and the runner stops it.
  "turn.interrupt": { label: "Interrupt", id: "turn-interrupt", run: (v) => v.interrupt() },
  "lease.take": { label: "Take lease", id: "lease-take", run: (v) => v.takeLease(false) },
  "lease.steal": { label: "Steal lease", id: "lease-steal", run: (v) => v.takeLease(true) },
  "lease.release": { label: "Release lease", id: "lease-release", run: (v) => v.releaseLease() },
  "approval.answer": { label: "Answer approval", id: "approval-control" },
  "session.stop": { label: "Stop session", id: "session-stop", confirm: "Really stop the session?", run: (v) => v.stopSession() },
  // The reset ledger (DESIGN.md §5). Clear, new and fork open a child
  // session; the page follows it there.
  "session.fresh": { label: "Fresh state", id: "session-fresh", run: (v) => v.ledger("FreshSession") },
  "session.reset": { label: "Reset context", id: "session-reset", confirm: "Append a reset boundary?", run: (v) => v.ledger("ResetSession") },
  "session.clear": { label: "Clear", id: "session-clear", confirm: "Stop this session and continue in a cleared child?", run: (v) => v.ledger("ClearSession") },
  "session.new": { label: "New in lineage", id: "session-new", confirm: "Stop this session and start a new one in its lineage?", run: (v) => v.ledger("NewSession") },
  "session.fork": { label: "Fork at head", id: "session-fork", run: (v) => v.ledger("ForkSession") },
  // Moving the session's execution (DESIGN.md §8) to the node picked next
  // to the button; the page stays attached and follows the new epoch.
  "session.move": { label: "Move", id: "session-move", run: (v) => v.move() },
  "detach": { label: "Detach", id: "detach", run: (v) => v.leave() },
};

// drives reports whether this page can trigger a control: a button that
// calls the fleet, or (input.text, approval.answer) the input box and the
// approval's own buttons.
function drives(name) {
  const known = CONTROLS[name];
  return !!known && (!!known.run || name === "input.text" || name === "approval.answer");
}

// presentedControls reads back from the DOM the controls the page
// presents, one per row of #controls: its availability, reason, message
// and handoff, the text shown, and its button (trigger, enabled). The
// client conformance fixture (client/conformance, run by e2e/witness)
// compares them with its corpus.
function presentedControls() {
  return [...document.querySelectorAll("#controls [data-control]")].map((e) => {
    const b = e.querySelector("[data-control-button]");
    return {
      control: e.dataset.control,
      available: e.dataset.available === "true",
      reason: e.dataset.reason || "",
      message: e.dataset.message || "",
      handoff: e.dataset.handoff || "",
      text: e.querySelector(".why").textContent,
      trigger: b ? (b.id ? "#" + b.id : '[data-control-button="' + e.dataset.control + '"]') : "",
      enabled: !!b && !b.disabled,
    };
  });
}

class SessionView {
  constructor(id, { rpc, stream, clientName, onUnauthenticated }) {
    this.id = id;
    this.rpc = rpc;
    this.stream = stream;
    this.clientName = clientName;
    this.onUnauthenticated = onUnauthenticated;
    this.closed = false;
    this.life = new AbortController();  // aborted when the view closes
    this.watchAbort = null;             // aborts the current WatchEvents
    this.attachmentId = "";
    this.myAttachments = new Set();     // every attachment this tab had
    this.keepaliveMs = 10000;
    this.keepaliveTimer = null;
    this.leaseTimer = null;
    this.describeTimer = null;
    this.describeSoon = null;
    this.desc = null;
    this.descGen = 0;                   // describes issued
    this.descShown = 0;                 // the newest one shown
    this.epoch = "0";
    this.lastSeq = -1n;                 // highest applied address; -1: not started
    this.firstSeq = 0n;                 // lowest address shown
    this.events = new Map();            // seq (string) → event
    this.busy = new Set();              // controls with a call in flight
    this.controlRows = new Map();       // control name → its row
    this.nodes = [];                    // NodeService/ListNodes, for the move picker

    this.view = $("#session-view");
    this.view.dataset.sessionId = id;
    this.view.dataset.attachmentId = "";
    this.view.dataset.lastSeq = "0";
    $("#session-id").textContent = id;
    $("#session-title").textContent = id;
    $("#controls").replaceChildren();
    $("#descriptor").replaceChildren();
    $("#attachments").replaceChildren();
    $("#action-error").textContent = "";
    $("#input-result").textContent = "";
    this.transcript = new Transcript($("#transcript"), {
      onAnswer: (seq, approved) => this.answerApproval(seq, approved),
      isMine: (att) => this.myAttachments.has(att),
    });
    this.setWatchState("connecting", "");
  }

  // --- lifecycle ------------------------------------------------------------

  start() {
    this.run();
    this.describeTimer = setInterval(() => this.describe().catch(() => {}), DESCRIBE_EVERY_MS);
  }

  // close ends the view: timers stop, the stream is cancelled and the
  // attachment detached (which releases its lease).
  close() {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    this.life.abort(new DOMException("view closed", "AbortError"));
    clearInterval(this.describeTimer);
    clearTimeout(this.describeSoon);
    clearInterval(this.keepaliveTimer);
    clearInterval(this.leaseTimer);
    if (!this.attachmentId) return Promise.resolve();
    return this.rpc("SessionService/Detach", { sessionId: this.id, attachmentId: this.attachmentId }, { keepalive: true })
      .catch(() => {}); // best effort: an undetached attachment expires by itself
  }

  // leave is the detach control: close and go back to the fleet.
  leave() {
    location.hash = "";
    return Promise.resolve();
  }

  // run keeps the view attached and watching until it closes, reconnecting
  // with backoff after any failure.
  async run() {
    let backoff = BACKOFF_MIN_MS;
    while (!this.closed) {
      try {
        await this.describe();
        backoff = BACKOFF_MIN_MS; // the node answers again
        if (!this.attachmentId) await this.attach();
        await this.watch();
        this.setWatchState("reconnecting", "the stream ended; resuming");
      } catch (err) {
        if (this.closed) return;
        if (err.code === "unauthenticated") {
          this.onUnauthenticated(err);
          return;
        }
        if (err.reason === "NOT_FOUND") {
          // No such session (a linearizable read said so): retrying would not help.
          this.setWatchState("error", errorText(err));
          return;
        }
        if (err.reason === "ATTACHMENT_NOT_FOUND") this.dropAttachment();
        this.setWatchState("reconnecting", errorText(err));
      }
      try {
        await sleep(backoff, this.life.signal);
      } catch (_) {
        return;
      }
      backoff = Math.min(backoff * 2, BACKOFF_MAX_MS);
    }
  }

  async attach() {
    const gen = ++this.descGen;
    const r = await this.rpc("SessionService/Attach", {
      sessionId: this.id, clientKind: "browser", clientName: this.clientName(),
      capabilities: Object.keys(CONTROLS),
    }, { signal: this.life.signal });
    this.attachmentId = r.attachmentId;
    this.myAttachments.add(r.attachmentId);
    this.view.dataset.attachmentId = r.attachmentId;
    this.keepaliveMs = Number(r.keepaliveMs || 10000);
    clearInterval(this.keepaliveTimer);
    this.keepaliveTimer = setInterval(() => this.keepAlive(), this.keepaliveMs);
    $("#attachment-id").textContent = r.attachmentId;
    this.applyDescriptor(r.descriptor, gen);
  }

  // dropAttachment forgets an attachment that expired or was detached; the
  // run loop attaches anew.
  dropAttachment() {
    this.attachmentId = "";
    this.view.dataset.attachmentId = "";
    $("#attachment-id").textContent = "(none)";
    clearInterval(this.keepaliveTimer);
    this.stopRenewing();
    if (this.watchAbort) this.watchAbort.abort(new DOMException("reattach", "AbortError"));
  }

  async keepAlive() {
    if (!this.attachmentId) return;
    try {
      await this.rpc("SessionService/KeepAlive", { sessionId: this.id, attachmentId: this.attachmentId }, { signal: this.life.signal });
    } catch (err) {
      if (err.reason === "ATTACHMENT_NOT_FOUND") this.dropAttachment();
    }
  }

  // watch streams the journal after the last applied address until the
  // stream fails or ends. The first watch starts REPLAY_EVENTS back from
  // the head, like the terminal client.
  async watch() {
    if (this.lastSeq < 0n) {
      const head = u64(this.desc && this.desc.session && this.desc.session.headSeq);
      const cursor = head > REPLAY_EVENTS ? head - REPLAY_EVENTS : 0n;
      this.lastSeq = cursor;
      this.firstSeq = cursor + 1n;
      $("#load-earlier").hidden = this.firstSeq <= 1n;
    }
    const ctl = new AbortController();
    this.watchAbort = ctl;
    const onLife = () => ctl.abort(this.life.signal.reason);
    this.life.signal.addEventListener("abort", onLife, { once: true });
    // A silent connection (a partition, a half-open socket) is noticed by
    // the missing heartbeat.
    let watchdog = setTimeout(() => ctl.abort(new DOMException("no heartbeat", "AbortError")), WATCHDOG_MS);
    this.setWatchState("connecting", "watching after #" + this.lastSeq);
    try {
      await this.stream("SessionService/WatchEvents", {
        sessionId: this.id, afterSeq: this.lastSeq.toString(), attachmentId: this.attachmentId,
      }, (msg) => {
        clearTimeout(watchdog);
        watchdog = setTimeout(() => ctl.abort(new DOMException("no heartbeat", "AbortError")), WATCHDOG_MS);
        this.setWatchState("live", "");
        for (const ev of msg.events || []) this.apply(ev);
      }, { signal: ctl.signal });
    } catch (err) {
      if (err && err.name === "AbortError") {
        if (this.closed) throw err;
        throw new Connect.RpcError("unavailable", String(ctl.signal.reason && ctl.signal.reason.message || "stream aborted"), { reason: "RECONNECT" });
      }
      throw err;
    } finally {
      clearTimeout(watchdog);
      this.life.signal.removeEventListener("abort", onLife);
      if (this.watchAbort === ctl) this.watchAbort = null;
    }
  }

  // apply adds one event exactly once, in journal order.
  apply(ev) {
    const seq = u64(ev.seq);
    if (seq <= this.lastSeq) return; // a replay of something already shown
    this.lastSeq = seq;
    this.view.dataset.lastSeq = seq.toString();
    ev.seq = seq.toString();
    this.events.set(ev.seq, ev);
    this.transcript.append(ev);
    if (ev.kind === "epoch.changed") {
      // A move's cutover (or a fresh, a resume): input goes to the new
      // epoch from now on. Take it from the event at once, and read the
      // descriptor now rather than after the usual pause: the placement,
      // the controls and the move picker changed with it.
      this.raiseEpoch((eventData(ev) || {}).epoch);
      this.describe().catch(() => {});
      if (this.controlRows.has("session.move")) this.loadNodes();
      return;
    }
    if (ev.kind !== "output") this.scheduleDescribe();
  }

  // raiseEpoch keeps the newest epoch seen: epochs only grow, and an answer
  // to a describe sent before a cutover must not take the view back.
  raiseEpoch(e) {
    if (e === undefined || e === null) return;
    if (u64(e) > u64(this.epoch)) this.epoch = str(e);
  }

  // loadEarlier reads the page of events before the first one shown and
  // renders the transcript again in order.
  async loadEarlier() {
    if (this.firstSeq <= 1n) return;
    const from = this.firstSeq > REPLAY_EVENTS ? this.firstSeq - REPLAY_EVENTS : 1n;
    try {
      const r = await this.rpc("SessionService/ReadEvents", {
        sessionId: this.id, fromSeq: from.toString(), limit: Number(this.firstSeq - from),
      });
      for (const ev of r.events || []) {
        const seq = u64(ev.seq);
        if (seq >= this.firstSeq) break;
        ev.seq = seq.toString();
        this.events.set(ev.seq, ev);
      }
      this.firstSeq = from;
      $("#load-earlier").hidden = this.firstSeq <= 1n;
      const ordered = [...this.events.values()].sort((a, b) => (u64(a.seq) < u64(b.seq) ? -1 : 1));
      this.transcript.render(ordered);
      this.applyDescriptor(this.desc);
    } catch (err) {
      this.showError(err);
    }
  }

  // --- the descriptor ---------------------------------------------------------

  scheduleDescribe() {
    clearTimeout(this.describeSoon);
    this.describeSoon = setTimeout(() => this.describe().catch(() => {}), 100);
  }

  // describe reads the descriptor as this attachment sees it. Several may be
  // in flight (the timer, events, actions); an answer older than the one
  // shown is dropped, so the view never steps back in time.
  async describe() {
    if (this.closed) return;
    const gen = ++this.descGen;
    const att = this.attachmentId;
    const d = await this.rpc("SessionService/DescribeSession", {
      sessionId: this.id, attachmentId: att,
    }, { signal: this.life.signal });
    if (this.closed || !this.applyDescriptor(d, gen)) return;
    // Our attachment expired (a sleeping laptop, a long partition): attach
    // again rather than act as an observer. Only the attachment this read
    // asked about is judged: a newer one may have been made meanwhile.
    if (att && att === this.attachmentId && !(d.attachments || []).some((a) => a.attachmentId === att)) {
      this.dropAttachment();
    }
  }

  // applyDescriptor shows d, read as number gen (omitted: a re-render of
  // the one shown), unless a newer one is shown already.
  applyDescriptor(d, gen) {
    if (!d) return false;
    if (gen !== undefined) {
      if (gen < this.descShown) return false;
      this.descShown = gen;
    }
    this.desc = d;
    const s = d.session || {};
    this.raiseEpoch(s.epoch || "0");
    $("#session-title").textContent = s.title || this.id;
    this.view.dataset.state = enumName(s.state, "SESSION_STATE_");
    this.view.dataset.head = str(s.headSeq || "0");
    this.renderDescriptor(d);
    this.renderAttachments(d.attachments || []);
    this.renderControls((d.capabilities && d.capabilities.controls) || [], d.capabilities && d.capabilities.version);
    const approval = this.control("approval.answer");
    this.transcript.setApprovalState(!!(approval && approval.available), s.pending && s.pending.approvalSeq);
    // Renew the lease while the descriptor says this attachment holds it,
    // also after a reconnect; stop when it does not.
    const release = this.control("lease.release");
    if (release && release.available) this.startRenewing();
    else this.stopRenewing();
    return true;
  }

  control(name) {
    const cs = (this.desc && this.desc.capabilities && this.desc.capabilities.controls) || [];
    return cs.find((c) => c.name === name);
  }

  renderDescriptor(d) {
    const s = d.session || {};
    const p = s.placement || {};
    const pend = s.pending || {};
    const rows = [];
    const row = (k, ...v) => rows.push(el("dt", {}, k), el("dd", { "data-field": k.toLowerCase().replace(/\s+/g, "-") }, ...v));
    row("State", enumName(s.state, "SESSION_STATE_"), s.stopReason ? " (" + s.stopReason + ")" : "");
    if (s.objective) row("Objective", s.objective);
    row("Epoch", str(s.epoch || "0"), " on ", d.computeNode || p.node || "?",
      " · ", [p.runtimeAdapter, p.provider, p.model].filter(Boolean).join(" / ") || "default adapter");
    row("Head", "#" + str(s.headSeq || "0"));
    if (s.providerSessionId) {
      row("Provider", [s.provider, s.providerThread ? "thread " + s.providerSessionId + " (the next turn resumes it)" :
        "session " + s.providerSessionId].filter(Boolean).join(", "));
    }
    if (p.approvals) row("Approvals", "decided by the runtime: " + p.approvals);
    const pending = [];
    if (u64(pend.turnInputSeq)) pending.push("turn running for input #" + pend.turnInputSeq);
    if ((pend.queuedInputs || []).length) pending.push("queued " + pend.queuedInputs.map((q) => "#" + q).join(", "));
    if (u64(pend.approvalSeq)) pending.push("approval #" + pend.approvalSeq + " awaits an answer");
    row("Pending", pending.join("; ") || "nothing");
    row("Turns", str(s.turnsCompleted || "0") + " completed");
    if (u64(s.contextCap) || u64(s.contextUsed)) row("Context", str(s.contextUsed || "0") + (u64(s.contextCap) ? " of " + s.contextCap : "") + " tokens");
    if (d.budget) row("Budget", this.budgetText(d.budget));
    if (s.move) row("Move", moveText(s.move), u64(s.movesCompleted) ? " · " + s.movesCompleted + " completed" : "");
    if (s.parentSession) {
      row("Lineage", s.boundarySource || "child", " of ",
        el("a", { href: "#session=" + encodeURIComponent(s.parentSession) }, s.parentSession),
        u64(s.forkAddress) ? " at #" + s.forkAddress : "");
    }
    const l = s.lease;
    if (l && u64(l.expiresUnixNano) > nowNanos()) {
      const mine = l.attachmentId === this.attachmentId;
      row("Lease", el("span", { class: mine ? "mine" : "" }, clientLabel(l.clientKind, l.clientName) + (mine ? " (this tab)" : "")),
        " · expires " + fmtIn(l.expiresUnixNano));
    } else {
      row("Lease", "free");
    }
    $("#descriptor").replaceChildren(...rows);
  }

  // budgetText shows what the lineage's envelope has used of each limited
  // axis, and the unlimited ones that saw use.
  budgetText(env) {
    const used = env.used || {}, limits = env.limits || {};
    const axes = [["turns", "turns"], ["inputTokens", "input tokens"], ["outputTokens", "output tokens"], ["queries", "queries"],
      ["toolCalls", "tool calls"], ["spendMicros", "µ$"]];
    const parts = [];
    for (const [k, name] of axes) {
      const u = u64(used[k]), l = u64(limits[k]);
      if (l) parts.push(u + "/" + l + " " + name);
      else if (u) parts.push(u + " " + name);
    }
    if (u64(env.refusals)) parts.push(env.refusals + " refused");
    return parts.join(", ") || "nothing used, no limits";
  }

  renderAttachments(ats) {
    $("#attachments").replaceChildren(...ats.map((a) => el("li", {
      class: (a.present ? "present" : "absent") + (a.attachmentId === this.attachmentId ? " mine" : ""),
      "data-attachment-id": a.attachmentId,
    },
    el("span", { class: "dot", title: a.present ? "present" : "expired" }),
    clientLabel(a.clientKind, a.clientName), " via ", a.node || "?",
    a.holdsLease ? el("span", { class: "badge" }, "lease") : null,
    a.attachmentId === this.attachmentId ? el("span", { class: "badge you" }, "this tab") : null)));
  }

  // renderControls shows every control of the capability set: a working
  // button when available, a disabled one with the reason and the handoff
  // when not; a control this page cannot drive (one a newer fleet added)
  // is shown too, unavailable, UNSUPPORTED. Each row carries what it
  // presents as data-available, data-reason, data-message and
  // data-handoff (presentedControls reads them back). Rows are updated in
  // place so a click is never lost to a re-render.
  renderControls(controls, version) {
    const root = $("#controls");
    root.dataset.version = str(version || "");
    const seen = new Set();
    for (const c of controls) {
      seen.add(c.name);
      let row = this.controlRows.get(c.name);
      if (!row) {
        row = this.controlRow(c.name);
        this.controlRows.set(c.name, row);
        root.append(row.e);
      }
      const p = drives(c.name)
        ? { available: !!c.available, reason: str(c.reason), message: str(c.message), handoff: str(c.handoff) }
        : { available: false, reason: "UNSUPPORTED", message: "not supported by this page", handoff: "" };
      Object.assign(row.e.dataset, { available: String(p.available), reason: p.reason, message: p.message, handoff: p.handoff });
      row.button.disabled = !p.available || this.busy.has(c.name);
      let why = "";
      if (!p.available) {
        why = [p.reason, p.message].filter(Boolean).join(": ");
        if (p.handoff) why += " → " + p.handoff;
      }
      row.why.textContent = why;
    }
    for (const [name, row] of this.controlRows) {
      if (!seen.has(name)) { row.e.remove(); this.controlRows.delete(name); }
    }
    // The input box is the input.text control itself.
    const input = controls.find((c) => c.name === "input.text");
    const canType = !!(input && input.available);
    $("#input-text").disabled = !canType;
    $("#input-send").disabled = !canType || this.busy.has("input.text");
    $("#input-form").dataset.available = String(canType);
    $("#input-reason").textContent = canType ? "" :
      input ? [input.reason, input.message].filter(Boolean).join(": ") + (input.handoff ? " → " + input.handoff : "") : "";
  }

  controlRow(name) {
    const known = CONTROLS[name];
    const button = el("button", { type: "button", id: known && known.id, "data-control-button": name }, known ? known.label : name);
    button.addEventListener("click", () => this.runControl(name));
    const why = el("span", { class: "why" });
    let picker = null;
    if (name === "session.move") {
      // The destination: a node from NodeService/ListNodes, or the least
      // loaded one the fleet admits.
      picker = el("select", { id: "move-node", class: "picker", title: "destination node" },
        el("option", { value: "" }, "least loaded node"));
      picker.addEventListener("focus", () => this.loadNodes());
      this.loadNodes(picker);
    }
    const e = el("div", { class: "control", "data-control": name }, button, el("code", { class: "name" }, name), picker, why);
    return { e, button, why };
  }

  // loadNodes fills the move picker: every node record with its gossip
  // status, load and draining flag; nodes that cannot take the session
  // (the current one, draining, not alive) are listed but disabled.
  async loadNodes(picker) {
    try {
      const r = await this.rpc("NodeService/ListNodes", {}, { signal: this.life.signal, timeoutMs: 5000 });
      this.nodes = r.nodes || [];
    } catch (_) {
      return; // keep the last list; the fleet decides anyway
    }
    picker = picker || $("#move-node");
    if (!picker) return;
    const current = (this.desc && this.desc.session && this.desc.session.placement && this.desc.session.placement.node) || "";
    const chosen = picker.value;
    const opts = [el("option", { value: "" }, "least loaded node")];
    for (const n of this.nodes) {
      const cap = u64(n.capacity) ? String(n.capacity) : "∞";
      const notes = [n.status || "unknown", str(n.sessions || 0) + "/" + cap + " sessions"];
      if (n.draining) notes.push("draining");
      if (n.name === current) notes.push("current");
      opts.push(el("option", {
        value: n.name, "data-node": n.name,
        disabled: n.name === current || n.draining || n.status !== "alive",
      }, n.name + " (" + notes.join(", ") + ")"));
    }
    picker.replaceChildren(...opts);
    if ([...picker.options].some((o) => o.value === chosen && !o.disabled)) picker.value = chosen;
  }

  async runControl(name) {
    const known = CONTROLS[name];
    if (name === "input.text") return $("#input-text").focus();
    if (name === "approval.answer") {
      const seq = this.desc && this.desc.session && this.desc.session.pending && this.desc.session.pending.approvalSeq;
      const item = seq && document.querySelector('.approval[data-seq="' + seq + '"]');
      if (item) item.scrollIntoView({ block: "center" });
      return;
    }
    if (!known || !known.run) return;
    if (known.confirm && !window.confirm(known.confirm)) return;
    await this.act(name, () => known.run(this));
  }

  // act runs one call for a control: its button is disabled meanwhile, an
  // error is shown inline, and the descriptor is read again either way.
  async act(name, fn) {
    this.busy.add(name);
    this.applyDescriptor(this.desc);
    $("#action-error").textContent = "";
    try {
      return await fn();
    } catch (err) {
      if (err.code === "unauthenticated") this.onUnauthenticated(err);
      if (err.reason === "ATTACHMENT_NOT_FOUND") this.dropAttachment();
      this.showError(err);
      return undefined;
    } finally {
      this.busy.delete(name);
      if (!this.closed) {
        this.applyDescriptor(this.desc);
        this.describe().catch(() => {});
      }
    }
  }

  showError(err) {
    const e = $("#action-error");
    e.textContent = errorText(err);
    e.dataset.reason = (err && err.reason) || "";
  }

  needAttachment() {
    if (!this.attachmentId) throw new Connect.RpcError("failed_precondition", "not attached yet; reconnecting", { reason: "NOT_ATTACHED" });
  }

  // --- the lease --------------------------------------------------------------

  async takeLease(steal) {
    this.needAttachment();
    const r = await this.rpc("SessionService/TakeLease", { sessionId: this.id, attachmentId: this.attachmentId, steal });
    this.startRenewing(Number(r.ttlMs || 15000));
  }

  async releaseLease() {
    this.needAttachment();
    this.stopRenewing();
    await this.rpc("SessionService/ReleaseLease", { sessionId: this.id, attachmentId: this.attachmentId });
  }

  // The holder renews every ttl/3, so two missed renewals still keep it.
  startRenewing(ttlMs) {
    if (ttlMs) this.leaseTtlMs = ttlMs;
    if (this.leaseTimer) return;
    this.leaseTimer = setInterval(() => this.renewLease(), Math.max(1000, (this.leaseTtlMs || 15000) / 3));
  }

  stopRenewing() {
    clearInterval(this.leaseTimer);
    this.leaseTimer = null;
  }

  async renewLease() {
    if (!this.attachmentId) return;
    try {
      await this.rpc("SessionService/RenewLease", { sessionId: this.id, attachmentId: this.attachmentId }, { signal: this.life.signal });
    } catch (err) {
      if (err.code === "unavailable" || err.name === "AbortError") return; // retry on the next tick
      // Stolen or expired: stop renewing and show who holds it now.
      this.stopRenewing();
      this.showError(err);
      this.scheduleDescribe();
    }
  }

  // --- acting -----------------------------------------------------------------

  // sendInput submits typed input. Each input carries a request id; when a
  // send fails without an answer (the network, a node going away) and the
  // same text is sent again, it reuses the id, so the input is journaled
  // once even if the first attempt had committed.
  async sendInput(text) {
    if (!text.trim() || this.busy.has("input.text")) return;
    if (!this.unanswered || this.unanswered.text !== text) this.unanswered = { text, requestId: newRequestID() };
    const requestId = this.unanswered.requestId;
    const r = await this.act("input.text", async () => {
      this.needAttachment();
      const act = (rid) => this.rpc("SessionService/Act", {
        sessionId: this.id, attachmentId: this.attachmentId, expectedEpoch: this.epoch, input: { text }, requestId: rid,
      });
      try {
        try {
          return await act(requestId);
        } catch (err) {
          // The session moved (or was refreshed) since the descriptor this
          // tab acts on: read the new epoch and send once more, under a new
          // request id (the refusal is the first one's answer).
          if (err.reason !== "STALE_EPOCH") throw err;
          await this.describe();
          this.unanswered = { text, requestId: newRequestID() };
          return await act(this.unanswered.requestId);
        }
      } catch (err) {
        // A typed refusal is an answer: the next send is a new input.
        if (err.code !== "unavailable" && err.code !== "unknown" && err.code !== "deadline_exceeded") this.unanswered = null;
        throw err;
      }
    });
    if (r) {
      this.unanswered = null;
      $("#input-text").value = "";
      const res = $("#input-result");
      res.textContent = "sent as #" + r.seq;
      res.dataset.seq = str(r.seq);
    }
  }

  // interrupt interrupts the running turn; after a move or refresh since
  // the descriptor it acts on, it reads the new epoch and tries once more.
  async interrupt() {
    this.needAttachment();
    const act = () => this.rpc("SessionService/Act", {
      sessionId: this.id, attachmentId: this.attachmentId, expectedEpoch: this.epoch, interrupt: {}, requestId: newRequestID(),
    });
    let r;
    try {
      r = await act();
    } catch (err) {
      if (err.reason !== "STALE_EPOCH") throw err;
      await this.describe();
      r = await act();
    }
    const res = $("#input-result");
    res.textContent = "turn interrupted (#" + str(r.seq) + ")";
    res.dataset.seq = str(r.seq);
  }

  answerApproval(seq, approved) {
    return this.act("approval.answer", async () => {
      this.needAttachment();
      const r = await this.rpc("SessionService/AnswerApproval", {
        sessionId: this.id, attachmentId: this.attachmentId, approvalSeq: String(seq), approved,
      });
      if (r.alreadyAnswered) $("#input-result").textContent = "approval #" + seq + " was already answered";
    });
  }

  // ledger runs a reset-ledger operation; when it leaves a different
  // session in force (clear, new, fork), the page opens that one.
  async ledger(method) {
    const r = await this.rpc("SessionService/" + method, { sessionId: this.id });
    const b = r.boundary || {};
    const next = b.session && b.session.sessionId;
    $("#input-result").textContent = (b.action || method) + (next && next !== this.id ? " → " + next : "");
    if (next && next !== this.id) location.hash = "session=" + encodeURIComponent(next);
  }

  // move asks the fleet to move the session's execution to the node picked
  // (or the least loaded admitted one); the move.* events show its
  // progress, and the cutover's epoch.changed the new epoch.
  async move() {
    const picker = $("#move-node");
    const to = (picker && picker.value) || "";
    const r = await this.rpc("SessionService/MoveSession", { sessionId: this.id, toNode: to, requestId: newRequestID() });
    const m = r.move || {};
    const res = $("#input-result");
    res.textContent = "move " + (m.moveId || "") + " requested → " + (to || "the least loaded node");
    res.dataset.moveId = m.moveId || "";
  }

  stopSession() {
    return this.rpc("SessionService/StopSession", { sessionId: this.id, reason: "stopped from the browser by " + this.clientName() });
  }

  setWatchState(state, detail) {
    const e = $("#watch-state");
    e.dataset.state = state;
    e.textContent = state + (detail ? " — " + detail : "");
  }
}
