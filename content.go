package carmy

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// Content is a tool output made of content blocks, the form MCP gives a
// tool's result: text, images, audio, links to resources and resources
// themselves. A tool that returns Content has no output schema over MCP:
// its blocks are the result's content. Over HTTP the output is the blocks
// as MCP writes them, a JSON array; in Go, [Invoke] returns the values.
//
//	func chart(ctx carmy.Context, in ChartInput) (carmy.Content, error) {
//		png, err := render(in)
//		if err != nil {
//			return nil, err
//		}
//		return carmy.Content{carmy.Text{Text: "Sales by month"}, carmy.Image{Data: png, MIMEType: "image/png"}}, nil
//	}
type Content []Block

// Block is one block of [Content]: a [Text], [Image], [Audio],
// [ResourceLink] or [Resource]. Only those types implement it.
type Block interface {
	wire() map[string]any
}

// Text is a block of text.
type Text struct {
	Text string
}

// Image is an image, such as a PNG.
type Image struct {
	// Data is the image itself; JSON carries it in base64.
	Data []byte
	// MIMEType is its media type, such as "image/png".
	MIMEType string
}

// Audio is a sound, such as a WAV recording.
type Audio struct {
	// Data is the sound itself; JSON carries it in base64.
	Data []byte
	// MIMEType is its media type, such as "audio/wav".
	MIMEType string
}

// ResourceLink points to a resource that the client may read, without its
// contents.
type ResourceLink struct {
	URI         string
	Name        string // a short name, required by MCP
	Title       string // for people; optional
	Description string // optional
	MIMEType    string // optional
	Size        int64  // in bytes; 0 when unknown
}

// Resource is a resource embedded with its contents: text, or binary data
// in Blob.
type Resource struct {
	URI      string
	MIMEType string // optional
	Text     string // the contents, for a text resource
	Blob     []byte // the contents, for a binary resource; JSON carries it in base64
}

func (b Text) wire() map[string]any { return map[string]any{"type": "text", "text": b.Text} }

func (b Image) wire() map[string]any {
	return map[string]any{"type": "image", "data": b.Data, "mimeType": b.MIMEType}
}

func (b Audio) wire() map[string]any {
	return map[string]any{"type": "audio", "data": b.Data, "mimeType": b.MIMEType}
}

func (b ResourceLink) wire() map[string]any {
	m := map[string]any{"type": "resource_link", "uri": b.URI, "name": b.Name}
	optional(m, "title", b.Title)
	optional(m, "description", b.Description)
	optional(m, "mimeType", b.MIMEType)
	if b.Size > 0 {
		m["size"] = b.Size
	}
	return m
}

func (b Resource) wire() map[string]any {
	r := map[string]any{"uri": b.URI}
	optional(r, "mimeType", b.MIMEType)
	if b.Blob != nil {
		r["blob"] = b.Blob
	} else {
		r["text"] = b.Text
	}
	return map[string]any{"type": "resource", "resource": r}
}

func optional(m map[string]any, key, value string) {
	if value != "" {
		m[key] = value
	}
}

// MarshalJSON writes the blocks as MCP does: an array of objects, each
// with its "type".
func (c Content) MarshalJSON() ([]byte, error) {
	blocks := make([]map[string]any, 0, len(c))
	for i, b := range c {
		if b == nil {
			return nil, fmt.Errorf("content block %d is nil", i)
		}
		blocks = append(blocks, b.wire())
	}
	return json.Marshal(blocks)
}

// UnmarshalJSON reads blocks as MCP writes them.
func (c *Content) UnmarshalJSON(data []byte) error {
	var blocks []struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Data        []byte `json:"data"`
		MIMEType    string `json:"mimeType"`
		URI         string `json:"uri"`
		Name        string `json:"name"`
		Title       string `json:"title"`
		Description string `json:"description"`
		Size        int64  `json:"size"`
		Resource    *struct {
			URI      string  `json:"uri"`
			MIMEType string  `json:"mimeType"`
			Text     string  `json:"text"`
			Blob     *[]byte `json:"blob"`
		} `json:"resource"`
	}
	if err := json.Unmarshal(data, &blocks); err != nil {
		return err
	}
	out := make(Content, 0, len(blocks))
	for i, b := range blocks {
		switch b.Type {
		case "text":
			out = append(out, Text{Text: b.Text})
		case "image":
			out = append(out, Image{Data: b.Data, MIMEType: b.MIMEType})
		case "audio":
			out = append(out, Audio{Data: b.Data, MIMEType: b.MIMEType})
		case "resource_link":
			out = append(out, ResourceLink{URI: b.URI, Name: b.Name, Title: b.Title, Description: b.Description, MIMEType: b.MIMEType, Size: b.Size})
		case "resource":
			if b.Resource == nil {
				return fmt.Errorf("content block %d: a resource block without its resource", i)
			}
			r := Resource{URI: b.Resource.URI, MIMEType: b.Resource.MIMEType, Text: b.Resource.Text}
			if b.Resource.Blob != nil {
				r.Blob = *b.Resource.Blob
			}
			out = append(out, r)
		default:
			return fmt.Errorf("content block %d has an unknown type %q", i, b.Type)
		}
	}
	*c = out
	return nil
}

var contentType = reflect.TypeFor[Content]()

// contentSchema describes [Content] as JSON, for the tool's metadata.
var contentSchema = json.RawMessage(`{"type":"array","description":"MCP content blocks","items":{"type":"object","properties":{"type":{"enum":["text","image","audio","resource_link","resource"]}},"required":["type"]}}`)
