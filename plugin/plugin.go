// Package plugin is what both ends of an out-of-process aimon-gw tool share
// (issue 7, rule R4): the go-plugin handshake and gRPC glue, the checks on a
// tool definition, and the SDK a plugin author uses to serve tools:
//
//	func main() {
//		plugin.Serve(plugin.Tool{
//			Name:        "Upper",
//			Description: "Upper-cases text.",
//			InputSchema: `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`,
//			Run: func(ctx context.Context, req plugin.Request) plugin.Result {
//				var in struct{ Text string `json:"text"` }
//				if res, ok := req.Bind(&in); !ok {
//					return res
//				}
//				return plugin.Text(strings.ToUpper(in.Text))
//			},
//		})
//	}
//
// The gateway side lives in internal/exec/pluginhost.
package plugin

import (
	"context"
	"errors"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"aimon.dev/gw/plugin/pluginpb"
)

// Name is the key of the tools service in go-plugin's plugin set.
const Name = "tools"

// Handshake is the go-plugin handshake of aimon-gw plugins. The cookie only
// tells a binary that it was started by the gateway; it is not a secret.
// Bump ProtocolVersion on an incompatible change of pluginpb.
var Handshake = goplugin.HandshakeConfig{
	ProtocolVersion:  1,
	MagicCookieKey:   "AIMON_GW_PLUGIN",
	MagicCookieValue: "tools-v1-5b0e8c2a",
}

// GRPC is the go-plugin plugin of the wire protocol, used by both ends:
// the plugin sets Tools, the gateway leaves it nil. Only gRPC is
// implemented; the embedded NetRPCUnsupportedPlugin refuses net/rpc.
type GRPC struct {
	goplugin.NetRPCUnsupportedPlugin
	Tools pluginpb.ToolsServer
}

// GRPCServer registers the tools service.
func (p *GRPC) GRPCServer(_ *goplugin.GRPCBroker, s *grpc.Server) error {
	if p.Tools == nil {
		return errors.New("plugin.GRPC has no Tools server")
	}
	pluginpb.RegisterToolsServer(s, p.Tools)
	return nil
}

// GRPCClient returns a pluginpb.ToolsClient.
func (p *GRPC) GRPCClient(_ context.Context, _ *goplugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return pluginpb.NewToolsClient(c), nil
}
