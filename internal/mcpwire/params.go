// Package mcpwire is carmy's MCP wire layer: the strict reading of
// messages, the checks of their params, protocol routing and the stdio
// framing, with no knowledge of tools or registries.
package mcpwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
)

// paramsOf gives, for each method a client sends, a value of the type the
// MCP SDK reads its params into. The SDK's own refusal of params it cannot
// read quotes them and names its Go types; params are read here first,
// the same way, so that such a message is refused in the protocol's words.
var paramsOf = map[string]func() any{
	"initialize":               func() any { return new(initializeCheck) },
	"ping":                     func() any { return new(mcp.PingParams) },
	"server/discover":          func() any { return new(mcp.DiscoverParams) },
	"tools/list":               func() any { return new(mcp.ListToolsParams) },
	"tools/call":               func() any { return new(mcp.CallToolParamsRaw) },
	"prompts/list":             func() any { return new(mcp.ListPromptsParams) },
	"prompts/get":              func() any { return new(mcp.GetPromptParams) },
	"resources/list":           func() any { return new(mcp.ListResourcesParams) },
	"resources/templates/list": func() any { return new(mcp.ListResourceTemplatesParams) },
	"resources/read":           func() any { return new(mcp.ReadResourceParams) },
	"resources/subscribe":      func() any { return new(mcp.SubscribeParams) },
	"resources/unsubscribe":    func() any { return new(mcp.UnsubscribeParams) },
	"subscriptions/listen":     func() any { return new(mcp.SubscriptionsListenParams) },
	"completion/complete":      func() any { return new(mcp.CompleteParams) },
	//lint:ignore SA1019 clients of the protocol versions that have logging send it
	"logging/setLevel":          func() any { return new(mcp.SetLoggingLevelParams) },
	"notifications/initialized": func() any { return new(mcp.InitializedParams) },
	"notifications/cancelled":   func() any { return new(mcp.CancelledParams) },
	"notifications/progress":    func() any { return new(mcp.ProgressNotificationParams) },
	//lint:ignore SA1019 clients of the protocol versions that have roots send it
	"notifications/roots/list_changed": func() any { return new(mcp.RootsListChangedParams) },
}

// initializeCheck is initialize's params as the SDK reads them: its
// client capabilities take roots in both of their historical forms.
type initializeCheck struct {
	mcp.InitializeParams
	Capabilities *struct {
		mcp.ClientCapabilities
		//lint:ignore SA1019 clients of the protocol versions that have roots send it
		Roots *mcp.RootCapabilities `json:"roots,omitempty"`
	} `json:"capabilities"`
}

// envelope is the part of a message that names its method and params.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// ParamsAnswer checks the params of a message (or of each message of a
// batch) that passed CheckMessage. When the SDK could not read them, it
// returns the answer to send instead of the message, one error per
// request in it, and nothing of it runs; nil when the message may go on.
func ParamsAnswer(msg []byte) []byte {
	batch := []json.RawMessage{msg}
	// CheckMessage has made sure msg is one JSON value: only an array is
	// a batch, and only a batch needs splitting.
	if v := bytes.TrimLeft(msg, " \t\r\n"); len(v) > 0 && v[0] == '[' {
		if err := json.Unmarshal(msg, &batch); err != nil {
			return nil
		}
	}
	var answers []json.RawMessage
	refused := false
	for _, m := range batch {
		var env envelope
		if json.Unmarshal(m, &env) != nil {
			continue // not a request: the SDK's to answer
		}
		e := checkParams(env.Method, env.Params)
		if e == nil {
			continue
		}
		refused = true
		if len(env.ID) > 0 && string(env.ID) != "null" { // a notification gets no answer
			answers = append(answers, RPCAnswer(env.ID, e))
		}
	}
	switch {
	case !refused:
		return nil
	case len(answers) == 1 && len(batch) == 1:
		return answers[0]
	}
	b, _ := json.Marshal(answers)
	return b
}

// checkParams reads params as the SDK would for method.
func checkParams(method string, params json.RawMessage) *jsonrpc.Error {
	newParams, ok := paramsOf[method]
	if !ok || len(params) == 0 || string(params) == "null" {
		return nil
	}
	dec := segjson.NewDecoder(bytes.NewReader(params))
	dec.DontMatchCaseInsensitiveStructFields()
	err := dec.Decode(newParams())
	if err == nil {
		return nil
	}
	msg := fmt.Sprintf("Invalid params: the params of %s do not have the form the protocol gives them", method)
	var typeErr *segjson.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		// The decoder quotes the text that starts at the value it refused.
		value := typeErr.Value
		if u, err := strconv.Unquote(value); err == nil {
			value = u
		}
		msg += fmt.Sprintf(": %s may not be %s", typeErr.Field, jsonKind(value))
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
}

// RPCAnswer is a JSON-RPC error answer to the request with that id.
func RPCAnswer(id json.RawMessage, e *jsonrpc.Error) json.RawMessage {
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *jsonrpc.Error  `json:"error"`
	}{"2.0", id, e})
	return b
}

// jsonKind names the kind of a JSON value from its text, which an error
// must not quote: it is the caller's, and may be long or secret.
func jsonKind(text string) string {
	switch {
	case text == "":
		return "of this type"
	case text[0] == '"':
		return "a string"
	case text[0] == '{':
		return "an object"
	case text[0] == '[':
		return "an array"
	case text[0] == 't' || text[0] == 'f':
		return "a boolean"
	case text[0] == 'n':
		return "null"
	}
	return "a number"
}
