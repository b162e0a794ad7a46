package carmy

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// contentResult is the MCP result of a tool whose output is [Content]: its
// blocks, with no structured content.
func contentResult(res Result) (*mcp.CallToolResult, error) {
	var c Content
	if err := c.UnmarshalJSON(res.Output); err != nil {
		return nil, err
	}
	blocks := make([]mcp.Content, len(c))
	for i, b := range c {
		blocks[i] = mcpBlock(b)
	}
	return &mcp.CallToolResult{
		Content: blocks,
		Meta:    mcp.Meta{"carmy/execution_id": res.ExecutionID, "carmy/replayed": res.Replayed},
	}, nil
}

// mcpBlock is a block as the SDK writes it.
func mcpBlock(b Block) mcp.Content {
	switch b := b.(type) {
	case Text:
		return &mcp.TextContent{Text: b.Text}
	case Image:
		return &mcp.ImageContent{Data: b.Data, MIMEType: b.MIMEType}
	case Audio:
		return &mcp.AudioContent{Data: b.Data, MIMEType: b.MIMEType}
	case ResourceLink:
		l := &mcp.ResourceLink{URI: b.URI, Name: b.Name, Title: b.Title, Description: b.Description, MIMEType: b.MIMEType}
		if b.Size > 0 {
			l.Size = &b.Size
		}
		return l
	case Resource:
		return &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: b.URI, MIMEType: b.MIMEType, Text: b.Text, Blob: b.Blob}}
	}
	return nil // Block's method is unexported: no other type implements it
}
