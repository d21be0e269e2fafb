package geminihook

import (
	"testing"

	"aimon.dev/gw/internal/testkit/readsas"
)

// TestR2GeminiHookInputReadsAsJSONv2: the Gemini CLI hook input's reader
// token by token (readInput) reads every input as json v2 reads it into
// an Input, or fails where json v2 fails (ReadInput then gives json v2's
// words): BeforeTool and AfterTool inputs as Gemini CLI sends them, with
// and without mcp_context, nulls, names in another case, unknown names,
// duplicates, wrong types, and bytes that are not one JSON object.
func TestR2GeminiHookInputReadsAsJSONv2(t *testing.T) {
	readsas.JSONv2(t, readInput,
		`{"session_id":"s","transcript_path":"/t","cwd":"/p","hook_event_name":"BeforeTool","timestamp":"2026-12-02T21:00:39.687Z","tool_name":"run_shell_command","tool_input":{"command":"git status","description":"d"}}`,
		`{"session_id":"s","cwd":"/p","hook_event_name":"AfterTool","tool_name":"read_file","tool_input":{"absolute_path":"/p/a"},"tool_response":{"llmContent":"x","returnDisplay":"x"}}`,
		`{"cwd":"/p","hook_event_name":"BeforeTool","tool_name":"mcp_db_drop","tool_input":{},"mcp_context":{"server_name":"db","tool_name":"drop","url":"http://x"}}`,
		`{"mcp_context":null,"tool_name":"x"}`, `{"mcp_context":{}}`, `{}`, `null`, `{"tool_input":null,"tool_response":null,"cwd":null}`,
		`{"Tool_Name":"run_shell_command","MCP_CONTEXT":{"server_name":"a"}}`, `{"tool_name":"\u0072un"}`,
		// What json v2 refuses.
		`{"tool_name":"a","tool_name":"b"}`, `{"mcp_context":{"server_name":"a","server_name":"b"}}`, `{"mcp_context":[]}`,
		`{"mcp_context":{"tool_name":1}}`, `{"cwd":1}`, `{"tool_input":{"a":1,"a":2}}`, `[]`, ``, `{"a":1}{}`, `{"tool_name":"\xff"}`,
	)

}
