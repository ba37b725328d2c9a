package proc

import (
	"os"
	"sync"
)

// stdinWriter writes to a process's stdin from its own goroutine, in
// order, so fak never blocks on a process that is not reading (a large
// turn line or prompt, a process busy writing stdout): the turn keeps
// reading its output meanwhile. Once a write fails (the process is gone
// or closed stdin) the rest is dropped: the process's stdout tells what
// happened.
type stdinWriter struct {
	f    *os.File
	done chan struct{}

	mu      sync.Mutex
	cond    *sync.Cond
	queue   [][]byte
	closing bool // close stdin once the queue is written
}

func newStdinWriter(f *os.File) *stdinWriter {
	w := &stdinWriter{f: f, done: make(chan struct{})}
	w.cond = sync.NewCond(&w.mu)
	go w.run()
	return w
}

// send queues b for the process.
func (w *stdinWriter) send(b []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closing {
		w.queue = append(w.queue, b)
		w.cond.Signal()
	}
}

// close closes stdin once everything sent is written.
func (w *stdinWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closing = true
	w.cond.Signal()
}

// abort drops what is queued, closes stdin now (a write blocked on a full
// pipe returns) and waits for the writer to end.
func (w *stdinWriter) abort() {
	w.mu.Lock()
	w.closing = true
	w.queue = nil
	w.cond.Signal()
	w.mu.Unlock()
	_ = w.f.Close()
	<-w.done
}

func (w *stdinWriter) run() {
	defer close(w.done)
	defer w.f.Close()
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && !w.closing {
			w.cond.Wait()
		}
		if len(w.queue) == 0 {
			w.mu.Unlock()
			return
		}
		b := w.queue[0]
		w.queue = w.queue[1:]
		w.mu.Unlock()
		if _, err := w.f.Write(b); err != nil {
			w.mu.Lock()
			w.closing = true
			w.queue = nil
			w.mu.Unlock()
			return
		}
	}
}
