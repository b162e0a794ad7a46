package carmy

import (
	"context"
	"log/slog"
)

// peer is what a tool's [Context] reaches of the client of its call, the
// little the runtime needs of a door's client: progress, log messages,
// and questions for its user. The MCP door hands one over with each call
// of an MCP client; no other caller has one.
type peer interface {
	Progress(ctx context.Context, done, total float64, msg string)
	Log(ctx context.Context, level slog.Level, msg string, args []any)
	// elicitable returns nil when the client can ask its user for a
	// form's fields, else the [*Error] that tells the tool why not.
	elicitable() error
	// Elicit asks the user for a form's fields, the question going by
	// name in the sessionless protocol. An [*Error] it returns is the
	// door's answer for the tool to return as it is (a question that
	// waits for the client's next round).
	Elicit(ctx context.Context, name string, q question) (answer, error)
}

// question is what a tool asks the user at its client ([Context.Elicit]):
// a message, and the form of the fields it asks for.
type question struct {
	Message string
	Form    map[string]any // a form's schema: flat, of strings, numbers, booleans and lists of choices
}

// answer is the user's answer to a question, as a task keeps it: accepted
// with the form's fields, declined, or dismissed.
type answer struct {
	Action  string         `json:"action"` // "accept", "decline" or "cancel"
	Content map[string]any `json:"content,omitempty"`
	Meta    map[string]any `json:"_meta,omitempty"`
}

// taskPeer is the client of a call run as a task: a peer whose questions
// wait on the task, and which takes their answers as they reach the task.
type taskPeer interface {
	peer
	Deliver(answers map[string]answer)
}

// via is what the door a call came through hands the runtime with it; the
// zero value for a call in process or over the HTTP API.
type via struct {
	// peer is the client, for the tool's Context.
	peer peer
	// asker asks the person at the client to confirm the call in-band;
	// nil where the door cannot.
	asker personAsker
	// takesTasks reports a client that takes a task once the tool's
	// questions are answered, which a tool that runs only as a task may
	// then ask first.
	takesTasks bool
	// mcp describes the MCP request that carried the call ([Request.MCP]).
	mcp MCPRequest
}
