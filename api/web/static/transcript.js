// transcript.js: renders a session's journal as a conversation.
//
// Every event is one element .event[data-seq] showing its address (#seq),
// the same address every other client shows for it. Consecutive output
// chunks are joined into one reply block (the agent's reply), each chunk
// still its own addressed element inside it. The transcript only appends;
// loading earlier events re-renders it from the ordered list.
"use strict";

class Transcript {
  // onAnswer(approvalSeq, approved) answers an approval from its buttons.
  constructor(container, { onAnswer, isMine }) {
    this.root = container;
    this.onAnswer = onAnswer;
    this.isMine = isMine;
    this.reset();
  }

  reset() {
    this.root.replaceChildren();
    this.reply = null;       // the reply block output chunks join, while it is last
    this.approvals = new Map(); // approval seq → its element
    this.answered = new Map();  // approval seq → the approval.answered event
    this.canAnswer = false;
    this.pendingApproval = "0";
  }

  render(events) {
    this.reset();
    for (const ev of events) this.append(ev);
  }

  append(ev) {
    const data = eventData(ev);
    const stick = this.atBottom();
    if (ev.kind === "output") {
      this.appendChunk(ev);
    } else {
      this.reply = null;
      this.root.append(this.eventElement(ev, data));
    }
    if (stick) this.root.scrollTop = this.root.scrollHeight;
  }

  atBottom() {
    const r = this.root;
    return r.scrollHeight - r.scrollTop - r.clientHeight < 40;
  }

  addr(seq) {
    return el("span", { class: "addr", title: "address " + seq }, "#" + seq);
  }

  // appendChunk joins an output chunk to the reply being streamed, or
  // starts a reply block when something else came in between.
  appendChunk(ev) {
    if (!this.reply) {
      const range = el("span", { class: "range" });
      const body = el("div", { class: "body" });
      const block = el("div", { class: "reply", "data-first-seq": ev.seq },
        el("div", { class: "head" }, range, el("span", { class: "who agent" }, "agent")), body);
      this.root.append(block);
      this.reply = { block, range, body, first: ev.seq };
    }
    const chunk = el("span", {
      class: "event chunk", "data-seq": ev.seq, "data-kind": ev.kind,
      title: "#" + ev.seq + " " + fmtTime(ev.timeUnixNano),
    }, ev.text || "");
    this.reply.body.append(chunk);
    this.reply.block.dataset.lastSeq = ev.seq;
    this.reply.range.textContent = "#" + this.reply.first + (ev.seq !== this.reply.first ? "–#" + ev.seq : "");
  }

  eventElement(ev, data) {
    const attrs = { class: "event", "data-seq": ev.seq, "data-kind": ev.kind, title: fmtTime(ev.timeUnixNano) };
    const d = data && typeof data === "object" ? data : {};
    switch (ev.kind) {
      case "input": {
        const who = clientLabel(d.client_kind, d.client_name) || "input";
        attrs.class += " input" + (this.isMine(d.attachment_id) ? " mine" : "");
        return el("div", attrs, this.addr(ev.seq), el("span", { class: "who" }, who), el("div", { class: "body" }, ev.text || ""));
      }
      case "tool.call":
      case "tool.result":
        attrs.class += " tool";
        return el("div", attrs, this.addr(ev.seq), el("span", { class: "who" }, ev.kind),
          el("div", { class: "body" }, ev.text || ""), this.dataBlock(data));
      case "approval.requested":
        return this.approvalElement(ev, data, attrs);
      case "approval.answered": {
        const seq = str(d.approval_seq);
        this.answered.set(seq, ev);
        this.refreshApproval(seq);
        const verdict = d.approved ? "approved" : "denied";
        return this.meta(ev, attrs, seq ? "approval #" + seq + " " + verdict + " by " + this.who(d) + (d.note ? ": " + d.note : "") : ev.text);
      }
      default:
        if (ev.kind.startsWith("move.") && d.state) {
          attrs.class += " move";
          attrs["data-move-state"] = d.state;
        }
        return this.meta(ev, attrs, this.describe(ev, d));
    }
  }

  // who names a client in a journal fact, marking this tab's own.
  who(d) {
    const name = clientLabel(d.client_kind, d.client_name) || d.attachment_id || "someone";
    return this.isMine(d.attachment_id) ? name + " (this tab)" : name;
  }

  // describe words a lifecycle event the way the terminal client does, from
  // its structured facts when they are there, else its text.
  describe(ev, d) {
    const text = ev.text || "";
    switch (ev.kind) {
      case "session.created": return "session created" + (text ? ": " + text : "");
      case "session.stopped": return "session stopped" + (text ? ": " + text : "");
      case "epoch.changed":
        if (d.placement) {
          const p = d.placement;
          if (p.runtime_adapter === "external") {
            // A guarded launch's agent, on the user's machine.
            return "epoch " + str(d.epoch) + ": external: " + (p.provider || "the agent") + (p.host ? " on host " + p.host : "") +
              ", launch " + (p.launch_id || "?") + (d.reason ? " (" + d.reason + ")" : "");
          }
          return "epoch " + str(d.epoch) + ": " + ([p.runtime_adapter, p.provider, p.model].filter(Boolean).join(" ") || "(no runtime adapter)") +
            (p.node ? " on " + p.node : "") + (d.reason ? " (" + d.reason + ")" : "");
        }
        break;
      case "move.requested":
      case "move.checkpointed":
      case "move.admitted":
      case "move.restored":
      case "move.cutover":
      case "move.failed":
      case "move.unsafe":
      case "move.warmed":
        if (d.move_id) return moveEventText(ev.kind, d);
        break;
      case "attachment.joined":
        if (d.client_kind) return this.who(d) + " joined" + (d.node ? " via " + d.node : "");
        break;
      case "attachment.left":
        if (d.client_kind) return this.who(d) + " left" + (d.reason ? " (" + d.reason + ")" : "");
        break;
      case "lease.taken":
        if (d.attachment_id) {
          let s = "lease taken by " + this.who(d);
          if (d.stolen_from) s += " (stolen from " + (this.isMine(d.stolen_from) ? "this tab" : d.stolen_from_name || d.stolen_from) + ")";
          return s;
        }
        break;
      case "lease.released":
        if (d.attachment_id) return "lease released by " + this.who(d) + (d.reason ? " (" + d.reason + ")" : "");
        break;
      case "turn.started": return "turn started" + (d.input_seq ? " (input #" + d.input_seq + ")" : "");
      case "turn.completed":
        if (d.status === "interrupted") {
          // The fleet closed it: interrupted by a client, a move or a launch.
          const by = d.by || {};
          const who = by.move ? "move " + by.move : by.launch ? "launch " + by.launch : by.client_kind || by.attachment_id ? this.who(by) : "";
          return "turn" + (d.input_seq ? " of input #" + str(d.input_seq) : "") + " interrupted" + (who ? " by " + who : "");
        }
        return "turn completed" + (text ? ": " + text : "");
      case "note": return "note: " + text;
    }
    return ev.kind + (text ? ": " + text : "");
  }

  meta(ev, attrs, text) {
    attrs.class += " meta";
    if (ev.kind.startsWith("lease.")) attrs.class += " lease";
    attrs.title = ev.kind + " " + (attrs.title || "");
    return el("div", attrs, this.addr(ev.seq), el("span", { class: "body" }, text));
  }

  dataBlock(data) {
    if (data === null || data === undefined || data === "") return null;
    return el("code", { class: "data" }, typeof data === "string" ? data : JSON.stringify(data));
  }

  approvalElement(ev, data, attrs) {
    attrs.class += " approval";
    const status = el("div", { class: "status" });
    const approve = el("button", { type: "button", class: "approve", "data-approval-seq": ev.seq }, "Approve");
    const deny = el("button", { type: "button", class: "deny", "data-approval-seq": ev.seq }, "Deny");
    approve.addEventListener("click", () => this.onAnswer(ev.seq, true));
    deny.addEventListener("click", () => this.onAnswer(ev.seq, false));
    const e = el("div", attrs, this.addr(ev.seq), el("span", { class: "who" }, "approval requested"),
      el("div", { class: "body" }, ev.text || ""), this.dataBlock(data), el("div", { class: "buttons" }, approve, deny), status);
    this.approvals.set(ev.seq, { e, approve, deny, status });
    this.refreshApproval(ev.seq, e);
    return e;
  }

  // setApprovalState comes from the descriptor: whether this attachment may
  // answer and which approval the running turn waits for.
  setApprovalState(canAnswer, pendingSeq) {
    this.canAnswer = canAnswer;
    this.pendingApproval = str(pendingSeq || "0");
    for (const seq of this.approvals.keys()) this.refreshApproval(seq);
  }

  refreshApproval(seq) {
    const a = this.approvals.get(seq);
    if (!a) return;
    const ans = this.answered.get(seq);
    if (ans) {
      const d = eventData(ans) || {};
      a.e.dataset.answered = d.approved ? "approved" : "denied";
      a.approve.hidden = a.deny.hidden = true;
      a.status.replaceChildren((d.approved ? "approved" : "denied") + " by " + this.who(d) + " at ", this.addr(ans.seq));
      return;
    }
    const open = this.canAnswer && this.pendingApproval === seq;
    a.approve.disabled = a.deny.disabled = !open;
    a.status.textContent = open ? "waiting for an answer" :
      this.pendingApproval === seq ? "attach to answer" : "not pending";
  }
}

// The words of client/journal (CacheText, FormatBytes, fmtDuration).
function cacheText(c) {
  if (c.cache === "warm") return "cache can be warm" + (c.provider_thread ? " (thread " + c.provider_thread + " resumes)" : "");
  if (c.cache === "cold") return "cold cache: " + (c.why || "");
  return "no provider cache to keep";
}

function bytesText(n) {
  const v = Number(u64(n));
  if (v >= 1e9) return (v / 1e9).toFixed(1) + " GB";
  if (v >= 1e6) return (v / 1e6).toFixed(1) + " MB";
  if (v >= 1e3) return (v / 1e3).toFixed(1) + " kB";
  return v + " B";
}

function nanosText(n) {
  const v = Number(u64(n));
  return v < 1e9 ? Math.floor(v / 1e6) + "ms" : parseFloat((v / 1e9).toFixed(2)) + "s";
}

// moveEventText words one transition of a move the way the terminal client
// does: where it goes, what the step fixed, how long after the request.
function moveEventText(kind, d) {
  const after = u64(d.elapsed_nanos) ? " (+" + (u64(d.elapsed_nanos) / 1000000n) + "ms)" : "";
  switch (kind) {
    case "move.requested":
      return "move requested: " + (d.from || "?") + " → " + (d.to || "the least loaded admitted node") +
        (d.cause ? " (" + d.cause + ")" : "") + "; the session runs on " + (d.from || "its node") + " until the cutover";
    case "move.checkpointed":
      return "move: checkpointed at #" + str(d.checkpoint_seq) +
        (d.workspace && u64(d.workspace.bytes) ? ", workspace " + bytesText(d.workspace.bytes) + " in " + str(d.workspace.chunks) +
          " chunks (snapshot " + nanosText(d.workspace.snapshot_nanos) + ")" : "") + after;
    case "move.admitted":
      return "move: " + (d.to || "?") + " admitted" + ((d.checks || []).length ? " (" + d.checks.join(", ") + ")" : "") +
        ((d.degradation || []).length ? "; degradation: " + d.degradation.join("; ") : "") + after;
    case "move.restored": {
      const t = d.transfer;
      return "move: restored on " + (d.to || "?") + " as epoch " + str(d.new_epoch) +
        (t && (u64(t.bytes_sent) || u64(t.bytes_present)) ? "; workspace: " + bytesText(t.bytes_sent) + " sent in " + str(t.chunks_sent) +
          " chunks (" + nanosText(t.fetch_nanos) + "), " + bytesText(t.bytes_present) + " already there in " + str(t.chunks_present) +
          ", restored in " + nanosText(t.restore_nanos) : "") +
        (d.cache ? "; " + cacheText(d.cache) : "") + after;
    }
    case "move.warmed":
      return "move warm-up: the first turn after the move (input #" + str(d.input_seq) + ") took " + nanosText(d.warmup_nanos) +
        (d.cache ? "; " + cacheText(d.cache) : "");
    case "move.cutover": return "move committed: " + (d.from || "?") + " → " + (d.to || "?") + ", epoch " + str(d.new_epoch) + after;
  }
  return (kind === "move.unsafe" ? "move unsafe (no safe point)" : "move failed") + (d.phase ? " in " + d.phase : "") +
    (d.reason ? ": " + d.reason : "") + (d.from ? "; the session stays on " + d.from : "") + after;
}
