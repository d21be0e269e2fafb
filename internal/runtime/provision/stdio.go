package provision

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioTransport runs a stdio server and carries its session, as the
// SDK's CommandTransport does (the process stopped the same way), but it
// reads each message once, off one decoder for the stream, in the SDK
// connection's own reading goroutine. The SDK's reads each one three
// times, twice through a decoder with a buffer of 32 KiB of its own, in
// a goroutine of its own; on a call through the gateway, collecting that
// garbage is most of the processor time (BenchmarkUpstreamFrontEnds: 1.24
// MB allocated a round before, 1.11 MB after).
type stdioTransport struct {
	cmd       *exec.Cmd
	terminate time.Duration // how long Close waits for an exit before SIGTERM, and again before SIGKILL
}

func (t *stdioTransport) Connect(context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	return newStdioConn(t.cmd, stdout, stdin, t.terminate, MaxMessage), nil
}

// newStdioConn reads the server's messages from stdout, each at most max
// bytes, and writes the client's to stdin.
func newStdioConn(cmd *exec.Cmd, stdout io.Reader, stdin io.WriteCloser, terminate time.Duration, max int) *stdioConn {
	c := &stdioConn{cmd: cmd, stdin: stdin, terminate: terminate, limit: &frameLimit{r: stdout, max: max}}
	// Lenient as the SDK is with what a server writes: a name twice (the
	// last counts), text that is not UTF-8.
	c.dec = jsontext.NewDecoder(c.limit, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	return c
}

type stdioConn struct {
	cmd       *exec.Cmd
	terminate time.Duration
	dec       *jsontext.Decoder // Read's only: the SDK reads in one goroutine
	limit     *frameLimit

	wmu   sync.Mutex
	stdin io.WriteCloser

	closeOnce sync.Once
	closeErr  error
}

func (c *stdioConn) SessionID() string { return "" }

// wireMessage is a JSON-RPC message as the SDK's DecodeMessage reads it.
type wireMessage struct {
	Version string         `json:"jsonrpc"`
	ID      any            `json:"id"` // a number is a float64, as the SDK reads it
	Method  *string        `json:"method"`
	Params  jsontext.Value `json:"params"`
	Result  jsontext.Value `json:"result"`
	Error   *jsonrpc.Error `json:"error"`
}

// Read reads the next message. An error ends the session, as the SDK's
// does: the stream cannot be read on after a broken message.
func (c *stdioConn) Read(context.Context) (jsonrpc.Message, error) {
	c.limit.n = 0
	var w wireMessage
	if err := jsonv2.UnmarshalDecode(c.dec, &w); err != nil {
		if errors.Is(err, errTooLarge) {
			return nil, fmt.Errorf("a message of the server is longer than %d bytes: %w", c.limit.max, errTooLarge)
		}
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("the server wrote what is not a JSON-RPC message: %w", err)
	}
	if w.Version != "2.0" {
		return nil, fmt.Errorf("the server wrote a message without \"jsonrpc\": \"2.0\" (%q)", w.Version)
	}
	id, err := jsonrpc.MakeID(w.ID)
	if err != nil {
		return nil, fmt.Errorf("the server wrote a message whose id is neither a string nor a number: %w", err)
	}
	if w.Method != nil {
		return &jsonrpc.Request{ID: id, Method: *w.Method, Params: []byte(w.Params)}, nil
	}
	if !id.IsValid() {
		return nil, fmt.Errorf("the server wrote a response without an id, or a request without a method")
	}
	resp := &jsonrpc.Response{ID: id, Result: []byte(w.Result)}
	if w.Error != nil {
		resp.Error = w.Error // never a typed nil in the interface
	}
	return resp, nil
}

func (c *stdioConn) Write(_ context.Context, msg jsonrpc.Message) error {
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("marshaling message: %v", err)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err = c.stdin.Write(append(b, '\n'))
	return err
}

// Close ends the session as the MCP specification has a client end a
// stdio server's: its input closed, then SIGTERM, then SIGKILL, each
// after waiting for an exit. Wait then closes the server's output, which
// ends a Read that waits on it.
func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.stop() })
	return c.closeErr
}

func (c *stdioConn) stop() error {
	if err := c.stdin.Close(); err != nil {
		return fmt.Errorf("closing stdin: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	wait := func() (error, bool) {
		timer := time.NewTimer(c.terminate)
		defer timer.Stop()
		select {
		case err := <-exited:
			return err, true
		case <-timer.C:
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	if c.cmd.Process.Signal(syscall.SIGTERM) == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := c.cmd.Process.Kill(); err != nil {
		return err
	}
	if err, ok := wait(); ok {
		return err
	}
	return errors.New("the server did not exit after SIGKILL")
}

// frameLimit bounds the bytes read for one message (n counts from the
// start of each Read), as the SDK's stdio transport bounds them.
type frameLimit struct {
	r   io.Reader
	max int
	n   int
}

func (l *frameLimit) Read(p []byte) (int, error) {
	if l.n >= l.max {
		return 0, errTooLarge
	}
	if len(p) > l.max-l.n {
		p = p[:l.max-l.n]
	}
	n, err := l.r.Read(p)
	l.n += n
	return n, err
}
