package carmy

import (
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ConfigureMCP lets the host add to the MCP server that carmy builds, the
// one that [Registry.Handler] serves at /mcp (to clients of every
// protocol version) and [Registry.ServeStdio] over streams: resources,
// resource templates, prompts and middleware, with the official SDK's own
// API (github.com/modelcontextprotocol/go-sdk/mcp). carmy does not
// re-implement them. configure runs once, when the server is first
// needed, after carmy's tools are added; calls accumulate, in order.
//
//	b.ConfigureMCP(func(s *mcp.Server) {
//		s.AddResource(&mcp.Resource{URI: "docs://readme", Name: "readme", MIMEType: "text/markdown"}, readReadme)
//		s.AddPrompt(&mcp.Prompt{Name: "summarize"}, summarizePrompt)
//	})
//
// Tools added here are the SDK's, outside carmy's runtime: no validation,
// confirmation, idempotency or middleware of carmy's applies to them.
func (b *Builder) ConfigureMCP(configure func(*mcp.Server)) *Builder {
	if configure == nil {
		b.misuse("Builder.ConfigureMCP(nil)")
		return b
	}
	b.mcpConfig.server = append(b.mcpConfig.server, configure)
	return b
}

// ConfigureMCPOptions lets the host set what the official SDK takes only
// when a server is made, in [mcp.ServerOptions]: the completion handler
// (completion/complete), the resource subscription handlers, the
// instructions. configure gets the options carmy chose (its logger, and
// capabilities that advertise only what carmy does; the SDK adds those of
// what the host configures) and may change them. Calls accumulate, in
// order.
func (b *Builder) ConfigureMCPOptions(configure func(*mcp.ServerOptions)) *Builder {
	if configure == nil {
		b.misuse("Builder.ConfigureMCPOptions(nil)")
		return b
	}
	b.mcpConfig.options = append(b.mcpConfig.options, configure)
	return b
}

// mcpConfig is what the host adds to the MCP server.
type mcpConfig struct {
	options []func(*mcp.ServerOptions)
	server  []func(*mcp.Server)
}

func (c mcpConfig) clone() mcpConfig {
	return mcpConfig{options: slices.Clone(c.options), server: slices.Clone(c.server)}
}

func (c mcpConfig) empty() bool { return len(c.options) == 0 && len(c.server) == 0 }

func (c mcpConfig) applyOptions(o *mcp.ServerOptions) {
	for _, f := range c.options {
		f(o)
	}
}

func (c mcpConfig) applyServer(s *mcp.Server) {
	for _, f := range c.server {
		f(s)
	}
}
