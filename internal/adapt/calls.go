package adapt

import (
	"bytes"
	"encoding/json"
	"sync"
)

// ToolCall is one tool call of a model's turn, as the framework received
// it.
type ToolCall struct {
	ID    string
	Name  string
	Input json.RawMessage
}

// Calls finds the id of a tool call, for frameworks that run a tool
// without telling it which of the turn's calls it runs (Genkit, the
// Anthropic tool runner), from the calls of the model's last turn: the
// first call of that tool with that input whose id no run has taken yet.
// Two calls of one tool with one input in one turn are interchangeable,
// so whichever run takes whichever id, each id is run once. A Calls is
// safe for concurrent use; the calls of one turn run concurrently.
type Calls struct {
	mu    sync.Mutex
	turn  []ToolCall
	taken map[string]bool
}

// Turn makes calls the model's last turn, unless they already are.
func (c *Calls) Turn(calls []ToolCall) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sameTurn(c.turn, calls) {
		return
	}
	c.turn, c.taken = calls, map[string]bool{}
}

func sameTurn(a, b []ToolCall) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID {
			return false
		}
	}
	return true
}

// Take returns the id of a call of tool with input in the last turn that
// no run has taken, and takes it; "" when there is none (the call then has
// no request id).
func (c *Calls) Take(tool string, input []byte) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, call := range c.turn {
		if call.ID != "" && call.Name == tool && !c.taken[call.ID] && sameJSON(call.Input, input) {
			c.taken[call.ID] = true
			return call.ID
		}
	}
	return ""
}

// sameJSON reports whether a and b are the same JSON text, but for
// insignificant white space.
func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}
