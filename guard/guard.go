package guard

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
)

// bindTimeout bounds BindLaunch at start.
const bindTimeout = 10 * time.Second

// socketName is the lifecycle socket's name in the run directory.
const socketName = "guard.sock"

// Options configure one guarded launch.
type Options struct {
	// Provider names the harness: claude, codex and gemini get their hooks
	// injected; any other name none (the harness calls the hook itself).
	Provider string
	// SessionID binds the launch to an existing session; empty creates one.
	SessionID string
	// Addr is the base URL of a fak node; Token its API token (may be empty).
	Addr, Token string
	// Host names this machine to the fleet: the session's placement is the
	// external runtime of the launch on this host, and other clients are
	// told the agent runs there. Empty: os.Hostname().
	Host string
	// TLS is the client TLS configuration for an https Addr (nil: Go's
	// defaults; a fleet with mutual TLS needs a client certificate).
	TLS *tls.Config
	// Command is the child's argv.
	Command []string
	// Exe is the absolute path of the fak binary (the hooks' command).
	Exe string
	Cwd string
	// Environ is the child's base environment (os.Environ()).
	Environ []string
	// NoMeter leaves the provider's model calls alone; by default the
	// guard points them at the node's metering gateway (gateway.go).
	NoMeter bool
	// Stdin, Stdout and Stderr are the child's (os.Std* pass the terminal).
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Run binds the launch, serves the lifecycle socket and runs the child to
// its end. It returns the child's exit code (128+N when a signal N ended
// it); an error means the child never started.
func Run(ctx context.Context, o Options) (int, error) {
	if len(o.Command) == 0 {
		return 0, errors.New("no command to run")
	}
	if o.Provider == "" {
		o.Provider = ProviderFor(o.Command[0])
	}
	program, err := exec.LookPath(o.Command[0])
	if err != nil {
		return 0, err
	}

	httpClient := apiclient.NewTLSHTTPClient(o.TLS, nil)
	defer httpClient.CloseIdleConnections()
	var opts []connect.ClientOption
	if o.Token != "" {
		opts = append(opts, connect.WithInterceptors(apiclient.Bearer(o.Token)))
	}
	client := fakv1connect.NewLifecycleServiceClient(httpClient, o.Addr, opts...)

	if o.Host == "" {
		o.Host, _ = os.Hostname() // unknown: the fleet shows no host
	}
	launchID := "lnc_" + randomHex(12)
	bindCtx, cancel := context.WithTimeout(ctx, bindTimeout)
	bound, err := client.BindLaunch(bindCtx, connect.NewRequest(&fakv1.BindLaunchRequest{
		LaunchId: launchID, Provider: o.Provider, SessionId: o.SessionID,
		Title: o.Provider + " in " + o.Cwd, Host: o.Host,
	}))
	cancel()
	if err != nil {
		return 0, fmt.Errorf("bind the launch at %s: %s", o.Addr, rpcErrorText(err))
	}
	session := bound.Msg.GetSession().GetSessionId()

	runDir, err := makeRunDir()
	if err != nil {
		return 0, fmt.Errorf("run directory: %w", err)
	}
	defer os.RemoveAll(runDir)
	token := randomHex(32)
	budget := HookBudget(func(k string) string { v, _ := lookupEnv(o.Environ, k); return v })
	l := newLaunch(client, launchID, o.Provider, session, runDir, budget)
	l.writeState()
	socket := filepath.Join(runDir, socketName)
	srv, err := Listen(socket, token, l.handle)
	if err != nil {
		return 0, fmt.Errorf("lifecycle socket: %w", err)
	}
	go srv.Serve()
	defer srv.Close()

	child := &Launch{Provider: o.Provider, RunDir: runDir, Exe: o.Exe, Cwd: o.Cwd,
		Args: append([]string{}, o.Command...), Env: append([]string{}, o.Environ...)}
	if a := AdapterFor(o.Provider); a != nil {
		if err := a.Prepare(child); err != nil {
			return 0, fmt.Errorf("%s hooks: %w", o.Provider, err)
		}
	}
	if !o.NoMeter {
		MeterThroughGateway(child, o.Addr, launchID, o.Token)
	}
	for _, kv := range [][2]string{{EnvSocket, socket}, {EnvToken, token}, {EnvSession, session},
		{EnvLaunch, launchID}, {EnvAddr, o.Addr}} {
		child.Env = setEnv(child.Env, kv[0], kv[1])
	}

	cmd := &exec.Cmd{Path: program, Args: child.Args, Env: child.Env, Dir: o.Cwd,
		Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-sigs:
			if shouldForward(sig) {
				cmd.Process.Signal(sig)
			}
		case <-done:
			return exitCode(cmd.ProcessState), nil
		}
	}
}

// exitCode is the child's exit status as a shell reports it.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// makeRunDir makes the private run directory: os.MkdirTemp makes it 0700.
// A unix socket path is limited to about 100 bytes, so a long TMPDIR falls
// back to /tmp.
func makeRunDir() (string, error) {
	dir, err := os.MkdirTemp("", "fak-guard-")
	if err != nil {
		return "", err
	}
	if len(filepath.Join(dir, socketName)) > 100 {
		os.Remove(dir)
		if dir, err = os.MkdirTemp("/tmp", "fak-guard-"); err != nil {
			return "", err
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		os.Remove(dir)
		return "", err
	}
	return dir, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return hex.EncodeToString(b)
}

// Defaults shared with fakctl.
const (
	DefaultAddr  = apiclient.DefaultAddr
	DevTokenFile = apiclient.DevTokenFile
)

// ResolveAddr picks the node address as fakctl does: the flag, FAK_ADDR,
// then DefaultAddr, as a base URL without a trailing slash.
func ResolveAddr(flagAddr string, getenv func(string) string) (string, error) {
	return apiclient.ResolveAddr(flagAddr, getenv)
}

// ResolveToken picks the API token as fakctl does, first found wins: the
// flag, FAK_TOKEN, the file named by FAK_TOKEN_FILE (which must exist), then
// DevTokenFile under workDir (optional).
func ResolveToken(flagToken string, getenv func(string) string, workDir string) (string, error) {
	return apiclient.ResolveToken(flagToken, getenv, workDir)
}
