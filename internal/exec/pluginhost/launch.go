package pluginhost

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	goplugin "github.com/hashicorp/go-plugin"

	"aimon.dev/gw/plugin"
	"aimon.dev/gw/plugin/pluginpb"
)

// Verify checks what can be checked of s without starting it: the binary
// exists and is executable, and has the declared sha256. It returns the
// binary's path. vet and the policy loader use it to report a missing or
// altered plugin without starting one; every start checks again.
func Verify(s Spec) (path string, err error) {
	if len(s.Command) == 0 || s.Command[0] == "" {
		return "", errors.New("a plugin has an empty command; give plugin.command in the policy")
	}
	path, err = exec.LookPath(s.Command[0])
	if err != nil {
		return "", fmt.Errorf("the plugin %s cannot be started: %v; install the plugin binary or fix plugin.command in the policy", s, unwrapExec(err))
	}
	if s.SHA256 != "" {
		if err := checkSum(s, path); err != nil {
			return "", err
		}
	}
	return path, nil
}

// launch starts the plugin of s and asks it what it serves. Every error is
// a sentence naming the command and what to do.
func (h *Host) launch(s Spec) (*proc, error) {
	path, err := Verify(s)
	if err != nil {
		return nil, err
	}

	log := h.log.With("command", s.String())
	cmd := exec.Command(path, s.Command[1:]...)
	cmd.SysProcAttr = procAttr()
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  plugin.Handshake,
		Plugins:          goplugin.PluginSet{plugin.Name: &plugin.GRPC{}},
		RunnerFunc:       newRunner(cmd, s.Sandbox),
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		StartTimeout:     h.startTimeout,
		Logger:           newHCLog(log),
		Stderr:           newLineLog(log, slog.LevelInfo, "plugin stderr"),
		SyncStdout:       newLineLog(log, slog.LevelWarn, "plugin wrote to stdout (it should log to stderr)"),
		SyncStderr:       newLineLog(log, slog.LevelInfo, "plugin stderr"),
	})
	p := &proc{client: client, cmd: cmd, done: make(chan struct{})}

	rpc, err := client.Client()
	if err != nil {
		h.stop(p, true)
		return nil, startError(s, err)
	}
	raw, err := rpc.Dispense(plugin.Name)
	if err != nil {
		h.stop(p, true)
		return nil, fmt.Errorf("the plugin %s does not serve aimon-gw tools (%v); check that plugin.command names an aimon-gw plugin", s, err)
	}
	p.rpc = raw.(pluginpb.ToolsClient)

	ctx, cancel := context.WithTimeout(context.Background(), h.describeTimeout)
	defer cancel()
	resp, err := p.rpc.Describe(ctx, &pluginpb.DescribeRequest{})
	if err != nil {
		h.stop(p, true)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("the plugin %s did not answer Describe within %s; it was stopped. Fix the plugin", s, h.describeTimeout)
		}
		return nil, fmt.Errorf("the plugin %s failed its Describe call: %v; fix the plugin", s, err)
	}
	if err := plugin.NormalizeAll(resp.GetTools()); err != nil {
		h.stop(p, true)
		return nil, fmt.Errorf("the plugin %s gave a Describe answer that is not valid: %v; fix the plugin", s, err)
	}
	p.byName = map[string]ToolInfo{}
	for _, t := range resp.GetTools() {
		ti := ToolInfo{
			Name: t.Name, Description: t.Description, InputSchema: t.InputSchema,
			Concurrency: t.Concurrency, Interrupt: t.Interrupt,
		}
		p.tools = append(p.tools, ti)
		p.byName[ti.Name] = ti
	}
	log.Debug("plugin started", "pid", p.pid(), "tools", len(p.tools))
	return p, nil
}

func unwrapExec(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		if errors.Is(ee.Err, exec.ErrNotFound) {
			return fmt.Errorf("%s: %w", ee.Name, ee.Err)
		}
		return ee.Err
	}
	return err
}

// checkSum checks the binary at path against s.SHA256 with go-plugin's
// SecureConfig. go-plugin never resets the hash it checks with, so each
// start gets a fresh one.
func checkSum(s Spec, path string) error {
	sum, err := hex.DecodeString(s.SHA256)
	if err != nil || len(sum) != sha256.Size {
		return fmt.Errorf("the plugin %s has sha256 %q, which is not 64 hex digits; fix plugin.sha256 in the policy", s, s.SHA256)
	}
	secure := &goplugin.SecureConfig{Checksum: sum, Hash: sha256.New()}
	ok, err := secure.Check(path)
	if err != nil {
		return fmt.Errorf("the plugin binary %s could not be checked against plugin.sha256 (%v); it was not started", path, err)
	}
	if ok {
		return nil
	}
	got := "unknown"
	if f, err := os.Open(path); err == nil {
		hs := sha256.New()
		if _, err := io.Copy(hs, f); err == nil {
			got = hex.EncodeToString(hs.Sum(nil))
		}
		f.Close()
	}
	return fmt.Errorf("the plugin binary %s has sha256 %s, but the policy declares %s; it was not started. Install the binary the policy names, or update plugin.sha256 if the new binary is trusted", path, got, s.SHA256)
}

// startError turns go-plugin's start errors into sentences.
func startError(s Spec, err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "plugin exited before we could connect"),
		strings.Contains(msg, "Failed to read any lines from plugin's stdout"):
		return fmt.Errorf("the plugin %s exited before it finished starting; see its stderr in the log, and check that plugin.command names an aimon-gw plugin", s)
	case strings.Contains(msg, "Unrecognized remote plugin message"):
		line, _, _ := strings.Cut(strings.TrimPrefix(msg, "Unrecognized remote plugin message: "), "\n")
		return fmt.Errorf("the plugin %s wrote %q to stdout before its go-plugin handshake; standard output is reserved for the handshake, so the plugin must log to stderr (or it is not an aimon-gw plugin)", s, clip(line, 80))
	case strings.Contains(msg, "timeout while waiting for plugin to start"):
		return fmt.Errorf("the plugin %s did not finish its handshake in time; it was stopped. Check that plugin.command names an aimon-gw plugin", s)
	case strings.Contains(msg, "Incompatible API version") || strings.Contains(msg, "incompatible core API version"):
		return fmt.Errorf("the plugin %s speaks another protocol version (%v); rebuild it against this gateway's plugin SDK", s, err)
	}
	return fmt.Errorf("the plugin %s could not be started: %v", s, err)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func (p *proc) pid() int {
	if p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// stop ends p and returns its exit status when known. It is bounded: the
// graceful stop (go-plugin's Kill closes the connection and waits up to 2s)
// gets killTimeout, then the process group is killed and Kill gets another
// killTimeout. force skips the graceful part, for a process that crashed or
// hangs. It is called once per process.
func (h *Host) stop(p *proc, force bool) (exit string) {
	defer func() {
		h.mu.Lock()
		delete(h.live, p)
		h.mu.Unlock()
		close(p.done)
	}()
	if force {
		p.signal()
	}
	done := make(chan struct{})
	go func() { p.client.Kill(); close(done) }()
	select {
	case <-done:
	case <-time.After(h.killTimeout):
		p.signal()
		select {
		case <-done:
		case <-time.After(h.killTimeout):
			h.log.Error("a plugin process did not end after SIGKILL; abandoning it", "pid", p.pid())
			return ""
		}
	}
	// Kill has waited for go-plugin's cmd.Wait: ProcessState is set.
	if ps := p.cmd.ProcessState; ps != nil {
		return ps.String()
	}
	return ""
}

// signal kills p's process group: the plugin and anything it started.
func (p *proc) signal() {
	if pid := p.pid(); pid > 0 && !p.client.Exited() {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}
