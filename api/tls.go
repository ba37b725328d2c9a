package api

import "net"

// serve serves ln in plaintext (HTTP/1.1 and h2c) or, with Config.TLS,
// over TLS: net/http negotiates HTTP/2 or HTTP/1.1 by ALPN, and with the
// node's configuration a client without a certificate of the fleet's CA
// fails the handshake before any handler runs.
func (s *Server) serve(ln net.Listener) error {
	// Under TLS too the limiter sees raw connections: the handshake of
	// one that never authenticates costs no more than a slot.
	ln = newConnLimiter(ln, s.cfg.Limits, s.conns)
	if s.cfg.TLS == nil {
		return s.http.Serve(ln)
	}
	// The certificate is in TLSConfig; ServeTLS adds h2 and http/1.1 to
	// its NextProtos.
	return s.http.ServeTLS(ln, "", "")
}
