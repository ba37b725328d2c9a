// connect.js: the Connect protocol in JSON, spoken with nothing but fetch.
//
// Unary RPCs are a POST of the request's proto3 JSON; errors come back as
// {code, message, details}. Server streams are a POST of one enveloped
// request and a response of envelopes (1 flag byte, 4-byte big-endian
// length, JSON), the last one flagged end-of-stream and carrying the error,
// if any. Proto3 JSON writes 64-bit integers as strings, so every uint64
// (seq, epoch, head) stays a string or becomes a BigInt here; never a
// Number, which would lose precision past 2^53.
"use strict";

const Connect = (() => {
  const PKG = "fak.v1.";
  const FLAG_END_STREAM = 0x02;

  // RpcError carries what a person and the page need to act on a failure:
  // the Connect code, fak's machine-readable reason (from the ErrorInfo
  // detail) and the server's message.
  class RpcError extends Error {
    constructor(code, message, info) {
      super(message || code);
      this.name = "RpcError";
      this.code = code || "unknown";
      this.reason = (info && info.reason) || "";
      this.headSeq = (info && info.headSeq) || "0";
      this.leaderAddr = (info && info.leaderAddr) || "";
    }
    // "REASON: message", the form errors take everywhere in the page.
    toString() {
      return (this.reason || this.code.toUpperCase()) + ": " + this.message;
    }
  }

  // Connect's HTTP status → code table, for error bodies that are missing
  // (a proxy, a node shutting down mid-response).
  const statusCodes = {
    400: "invalid_argument", 401: "unauthenticated", 403: "permission_denied",
    404: "unimplemented", 408: "deadline_exceeded", 409: "aborted",
    412: "failed_precondition", 413: "resource_exhausted", 415: "internal",
    429: "unavailable", 431: "resource_exhausted", 499: "canceled",
    502: "unavailable", 503: "unavailable", 504: "unavailable",
  };

  // --- a tiny protobuf reader for fak.v1.ErrorInfo -------------------------
  // connect-go sends an error detail's JSON form ("debug") only when the
  // server is configured to; the binary value is always there.

  function base64Bytes(s) {
    s = s.replace(/-/g, "+").replace(/_/g, "/");
    while (s.length % 4) s += "="; // Connect may omit the padding
    const bin = atob(s);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  function readVarint(b, pos) {
    let v = 0n, shift = 0n;
    for (;;) {
      if (pos >= b.length) throw new Error("truncated varint");
      const byte = b[pos++];
      v |= BigInt(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return [v, pos];
      shift += 7n;
    }
  }

  // decodeErrorInfo reads fields 1 (reason), 2 (head_seq) and 3
  // (leader_addr) and skips anything newer.
  function decodeErrorInfo(bytes) {
    const info = { reason: "", headSeq: "0", leaderAddr: "" };
    const text = new TextDecoder();
    let pos = 0;
    while (pos < bytes.length) {
      let key;
      [key, pos] = readVarint(bytes, pos);
      const field = Number(key >> 3n), wire = Number(key & 7n);
      if (wire === 0) {
        let v;
        [v, pos] = readVarint(bytes, pos);
        if (field === 2) info.headSeq = v.toString();
      } else if (wire === 2) {
        let n;
        [n, pos] = readVarint(bytes, pos);
        const s = text.decode(bytes.subarray(pos, pos + Number(n)));
        pos += Number(n);
        if (field === 1) info.reason = s;
        if (field === 3) info.leaderAddr = s;
      } else if (wire === 1) {
        pos += 8;
      } else if (wire === 5) {
        pos += 4;
      } else {
        break; // groups: not in ErrorInfo; stop rather than misread
      }
    }
    return info;
  }

  function errorFromJSON(obj, fallbackCode) {
    obj = obj || {};
    let info = null;
    for (const d of obj.details || []) {
      if (d.type !== PKG + "ErrorInfo") continue;
      if (d.debug) {
        info = { reason: d.debug.reason || "", headSeq: d.debug.headSeq || "0", leaderAddr: d.debug.leaderAddr || "" };
      } else if (d.value) {
        try { info = decodeErrorInfo(base64Bytes(d.value)); } catch (_) { /* keep the message */ }
      }
    }
    return new RpcError(obj.code || fallbackCode, obj.message || "", info);
  }

  // A fetch that never reached the server (node down, network gone) is a
  // retryable "unavailable", like any other.
  function networkError(err) {
    if (err && err.name === "AbortError") return err;
    return new RpcError("unavailable", "network error: " + (err && err.message || err), { reason: "NETWORK" });
  }

  function headers(token, contentType) {
    const h = { "Content-Type": contentType, "Connect-Protocol-Version": "1" };
    if (token) h["Authorization"] = "Bearer " + token;
    return h;
  }

  // unary calls fak.v1.<method> (e.g. "SessionService/Attach"). keepalive
  // lets a call outlive the page (Detach on pagehide).
  async function unary(method, msg, { token, signal, keepalive, timeoutMs } = {}) {
    const h = headers(token, "application/json");
    if (timeoutMs) h["Connect-Timeout-Ms"] = String(timeoutMs);
    let resp;
    try {
      resp = await fetch("/" + PKG + method, {
        method: "POST", headers: h, body: JSON.stringify(msg || {}), signal, keepalive,
        credentials: "omit", cache: "no-store",
      });
    } catch (err) {
      throw networkError(err);
    }
    let body = null;
    try { body = await resp.json(); } catch (_) { /* empty or not JSON */ }
    if (!resp.ok) throw errorFromJSON(body, statusCodes[resp.status] || "unknown");
    return body || {};
  }

  function envelope(msg) {
    const json = new TextEncoder().encode(JSON.stringify(msg || {}));
    const out = new Uint8Array(5 + json.length);
    new DataView(out.buffer).setUint32(1, json.length, false);
    out.set(json, 5);
    return out;
  }

  // serverStream calls a server-streaming method and hands every message to
  // onMessage as it arrives. It resolves when the server ends the stream
  // cleanly and rejects with an RpcError otherwise (including a stream cut
  // without its end-of-stream envelope, e.g. a node crash).
  async function serverStream(method, msg, onMessage, { token, signal } = {}) {
    let resp;
    try {
      resp = await fetch("/" + PKG + method, {
        method: "POST", headers: headers(token, "application/connect+json"), body: envelope(msg), signal,
        credentials: "omit", cache: "no-store",
      });
    } catch (err) {
      throw networkError(err);
    }
    if (!resp.ok) {
      let body = null;
      try { body = await resp.json(); } catch (_) { /* not JSON */ }
      throw errorFromJSON(body, statusCodes[resp.status] || "unknown");
    }
    const reader = resp.body.getReader();
    const text = new TextDecoder();
    let buf = new Uint8Array(0);
    for (;;) {
      let chunk;
      try {
        chunk = await reader.read();
      } catch (err) {
        throw networkError(err);
      }
      if (chunk.done) {
        throw new RpcError("unavailable", "the stream ended without its end-of-stream message", { reason: "STREAM_CUT" });
      }
      const joined = new Uint8Array(buf.length + chunk.value.length);
      joined.set(buf);
      joined.set(chunk.value, buf.length);
      buf = joined;
      while (buf.length >= 5) {
        const len = new DataView(buf.buffer, buf.byteOffset, buf.byteLength).getUint32(1, false);
        if (buf.length < 5 + len) break;
        const flags = buf[0];
        const obj = JSON.parse(text.decode(buf.subarray(5, 5 + len)) || "{}");
        buf = buf.slice(5 + len);
        if (flags & FLAG_END_STREAM) {
          if (obj.error) throw errorFromJSON(obj.error, "unknown");
          return;
        }
        onMessage(obj);
      }
    }
  }

  return { RpcError, unary, serverStream, decodeErrorInfo, base64Bytes };
})();
