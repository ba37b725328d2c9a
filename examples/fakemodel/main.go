// Command fakemodel serves a stand-in OpenAI-compatible Chat Completions
// endpoint, for trying fak's model runtime without a model: it streams
// "model: <your last message>" a word at a time, in the API's exact
// streaming format, with a usage chunk. It is the server fak's own tests
// use (node/runner/model/modeltest).
//
//	go run ./examples/fakemodel -addr 127.0.0.1:8080 -tps 20
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/fak-dev/fak/node/runner/model/modeltest"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to serve on")
	tps := flag.Float64("tps", 20, "tokens per second the replies stream at (0: as fast as possible)")
	flag.Parse()
	s, err := modeltest.Listen(*addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakemodel:", err)
		os.Exit(1)
	}
	defer s.Close()
	s.SetDefault(func(r modeltest.Request) modeltest.Reply {
		reply := modeltest.Echo(r)
		reply.TokensPerSecond = *tps
		return reply
	})
	fmt.Printf("fakemodel: an OpenAI-compatible endpoint at %s (Ctrl-C stops it)\n", s.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	<-sig
}
