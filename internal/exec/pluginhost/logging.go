package pluginhost

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// hcLog adapts go-plugin's hclog.Logger to slog, for go-plugin's own
// messages. Plugin stderr does not come through here: go-plugin parses a
// JSON stderr line with unchecked type assertions ({"@message": 1} would
// panic the gateway), and it skips that parsing when the logger it names
// after the plugin is Off. So every Named logger but "stdio" is Off, and
// stderr reaches slog through ClientConfig.Stderr (lineLog) instead.
type hcLog struct {
	log  *slog.Logger
	name string
	off  bool
	args []any
}

func newHCLog(l *slog.Logger) hclog.Logger { return &hcLog{log: l} }

var hcLevels = map[hclog.Level]slog.Level{
	hclog.Trace: slog.LevelDebug - 4, hclog.Debug: slog.LevelDebug,
	hclog.Info: slog.LevelInfo, hclog.Warn: slog.LevelWarn, hclog.Error: slog.LevelError,
}

func (l *hcLog) Log(level hclog.Level, msg string, args ...any) {
	sl, ok := hcLevels[level]
	if l.off || !ok || !l.log.Enabled(context.Background(), sl) {
		return
	}
	if l.name != "" {
		args = append(args, "go-plugin", l.name)
	}
	l.log.Log(context.Background(), sl, msg, append(l.args, args...)...)
}

func (l *hcLog) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }
func (l *hcLog) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l *hcLog) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }
func (l *hcLog) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l *hcLog) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l *hcLog) enabled(level hclog.Level) bool {
	return !l.off && l.log.Enabled(context.Background(), hcLevels[level])
}
func (l *hcLog) IsTrace() bool { return l.enabled(hclog.Trace) }
func (l *hcLog) IsDebug() bool { return l.enabled(hclog.Debug) }
func (l *hcLog) IsInfo() bool  { return l.enabled(hclog.Info) }
func (l *hcLog) IsWarn() bool  { return l.enabled(hclog.Warn) }
func (l *hcLog) IsError() bool { return l.enabled(hclog.Error) }

func (l *hcLog) ImpliedArgs() []any { return l.args }

func (l *hcLog) With(args ...any) hclog.Logger {
	c := *l
	c.args = append(append([]any(nil), l.args...), args...)
	return &c
}

func (l *hcLog) Name() string { return l.name }

func (l *hcLog) Named(name string) hclog.Logger {
	c := *l
	if c.name != "" {
		name = c.name + "." + name
	}
	c.name = name
	c.off = name != "stdio"
	return &c
}

func (l *hcLog) ResetNamed(name string) hclog.Logger {
	c := *l
	c.name = ""
	return c.Named(name)
}

func (l *hcLog) SetLevel(hclog.Level) {}

func (l *hcLog) GetLevel() hclog.Level {
	switch {
	case l.off:
		return hclog.Off
	case l.IsTrace():
		return hclog.Trace
	case l.IsDebug():
		return hclog.Debug
	case l.IsInfo():
		return hclog.Info
	case l.IsWarn():
		return hclog.Warn
	}
	return hclog.Error
}

func (l *hcLog) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(l.StandardWriter(opts), "", 0)
}

func (l *hcLog) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return newLineLog(l.log, slog.LevelInfo, "go-plugin")
}

// lineLog logs what a plugin writes, a line at a time. A line in the JSON
// of hclog or of plugin.Logger keeps its level, message and fields; a line
// starting [DEBUG], [INFO], [WARN] or [ERROR] keeps its level; any other
// line is logged at level with msg. Lines are cut at maxLine bytes.
type lineLog struct {
	log   *slog.Logger
	level slog.Level
	msg   string

	mu  sync.Mutex
	buf []byte
}

const maxLine = 64 << 10

func newLineLog(l *slog.Logger, level slog.Level, msg string) *lineLog {
	return &lineLog{log: l, level: level, msg: msg}
}

func (w *lineLog) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			i = len(b)
		}
		for i > 0 {
			k := min(i, maxLine-len(w.buf))
			w.buf = append(w.buf, b[:k]...)
			b, i = b[k:], i-k
			if len(w.buf) == maxLine {
				w.emit(w.buf)
				w.buf = w.buf[:0]
			}
		}
		if len(b) > 0 { // b[0] is the newline
			w.emit(w.buf)
			w.buf = w.buf[:0]
			b = b[1:]
		}
	}
	return n, nil
}

var prefixLevels = []struct {
	prefix string
	level  slog.Level
}{
	{"[TRACE]", slog.LevelDebug - 4}, {"[DEBUG]", slog.LevelDebug}, {"[INFO]", slog.LevelInfo},
	{"[WARN]", slog.LevelWarn}, {"[ERROR]", slog.LevelError},
	{"panic: ", slog.LevelError}, {"fatal error: ", slog.LevelError},
}

func (w *lineLog) emit(b []byte) {
	line := strings.TrimRight(string(b), "\r")
	if strings.TrimSpace(line) == "" {
		return
	}
	ctx := context.Background()
	if level, msg, attrs, ok := parseJSONLine(line); ok {
		w.log.Log(ctx, level, msg, attrs...)
		return
	}
	level := w.level
	for _, p := range prefixLevels {
		if strings.HasPrefix(line, p.prefix) {
			level = p.level
			break
		}
	}
	w.log.Log(ctx, level, w.msg, "line", line)
}

// parseJSONLine reads an hclog JSON line: @level, @message, and the rest as
// fields. Any shape is accepted without panicking.
func parseJSONLine(line string) (slog.Level, string, []any, bool) {
	if !strings.HasPrefix(line, "{") {
		return 0, "", nil, false
	}
	var m map[string]any
	if json.Unmarshal([]byte(line), &m) != nil {
		return 0, "", nil, false
	}
	msg, ok := m["@message"].(string)
	if !ok {
		return 0, "", nil, false
	}
	level := slog.LevelInfo
	if s, ok := m["@level"].(string); ok {
		switch strings.ToLower(s) {
		case "trace":
			level = slog.LevelDebug - 4
		case "debug":
			level = slog.LevelDebug
		case "warn", "warning":
			level = slog.LevelWarn
		case "error":
			level = slog.LevelError
		}
	}
	var attrs []any
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch k {
		case "@message", "@level", "@timestamp", "@module", "@caller":
			continue
		}
		attrs = append(attrs, "plugin."+k, fmt.Sprint(m[k]))
	}
	return level, msg, attrs, true
}
