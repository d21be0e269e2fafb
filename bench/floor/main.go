// Command floor is the floor aimon-gw serve is measured against: JSON lines
// decoded with the standard library, a no-op Echo, and the reply encoded,
// with no checks at all (bench/serve.sh).
package main

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
)

type call struct {
	Type  string `json:"type"`
	ID    string `json:"id"`
	Name  string `json:"name"`
	Input struct {
		Message string `json:"message"`
		Times   any    `json:"times"`
	} `json:"input"`
}

type result struct {
	Type      string `json:"type"`
	ToolUseID string `json:"tool_use_id"`
	Content   string `json:"content"`
	IsError   bool   `json:"is_error"`
}

func main() {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 16<<20)
	w := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for sc.Scan() {
		var c call
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			continue
		}
		times, ok := c.Input.Times.(float64)
		if c.Input.Times == nil {
			times, ok = 1, true
		}
		r := result{Type: "tool_result", ToolUseID: c.ID}
		if !ok {
			r.Content, r.IsError = "Parameter 'times' must be an integer.", true
		} else {
			r.Content = strings.Repeat(c.Input.Message, int(times))
		}
		enc.Encode(r)
	}
	w.Flush()
}
