// Package wordcount is an example aimon-gw plugin tool, WordCount: it counts
// the lines, words and bytes of a text or of a file. cmd/wordcount serves it
// as a plugin. Build it and declare it in a policy:
//
//	go build -o bin/wordcount ./examples/plugins/wordcount/cmd/wordcount
//
//	tools: WordCount: {
//		description: "Counts lines, words and bytes."
//		input: {text?: string, file_path?: string}
//		plugin: {command: ["bin/wordcount"], sha256: "…"} // sha256sum bin/wordcount
//	}
package wordcount

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"aimon.dev/gw/plugin"
)

// Tool is the WordCount tool; it logs through log.
func Tool(log *slog.Logger) plugin.Tool {
	return plugin.Tool{
		Name:        "WordCount",
		Description: "Counts the lines, words and bytes of text, or of the file at file_path.",
		InputSchema: `{
			"type": "object",
			"properties": {
				"text": {"type": "string", "description": "The text to count."},
				"file_path": {"type": "string", "description": "A file to count instead, absolute or relative to the working directory."}
			},
			"additionalProperties": false
		}`,
		Concurrency: "concurrent_safe",
		Interrupt:   "cooperative",
		Run: func(ctx context.Context, req plugin.Request) plugin.Result {
			var in struct {
				Text     *string `json:"text"`
				FilePath *string `json:"file_path"`
			}
			if res, ok := req.Bind(&in); !ok {
				return res
			}
			switch {
			case in.Text != nil && in.FilePath != nil:
				return plugin.Errorf("Give either text or file_path, not both.")
			case in.Text != nil:
				return plugin.Text(count([]byte(*in.Text)))
			case in.FilePath != nil:
				path := *in.FilePath
				if !filepath.IsAbs(path) {
					if req.Workdir == "" {
						return plugin.Errorf("The file_path %q is relative and the call has no working directory; give an absolute path.", path)
					}
					path = filepath.Join(req.Workdir, path)
				}
				b, err := os.ReadFile(path)
				if err != nil {
					log.Warn("read failed", "path", path, "error", err)
					return plugin.Errorf("Cannot read %s: %v.", path, err)
				}
				return plugin.Text(count(b) + " " + path)
			}
			return plugin.Errorf("Give text or file_path.")
		},
	}
}

// count says what wc says: lines, words, bytes.
func count(b []byte) string {
	return fmt.Sprintf("%d %d %d", bytes.Count(b, []byte("\n")), len(bytes.Fields(b)), len(b))
}
