package modeltest

import (
	"net"
	"net/http"
	"net/http/httptest"
)

// Listen starts a server on addr ("127.0.0.1:8080"), for trying a model
// runtime by hand (examples/fakemodel) or from another process.
func Listen(addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{quit: make(chan struct{}), def: Echo, changed: make(chan struct{})}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Listener.Close()
	s.srv.Listener = ln
	s.srv.Start()
	s.URL = s.srv.URL + "/v1"
	return s, nil
}
