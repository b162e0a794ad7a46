package carmy_test

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

// sessionless is a raw client of the sessionless protocol (2026-07-28)
// that declares form elicitation.
type sessionless struct {
	t   *testing.T
	url string
}

// call sends one round of a tools/call: the arguments, and the members
// that carry the answers and the request state (a JSON fragment ending in
// a comma, or ""), and returns the result.
func (s sessionless) call(tool, args, extra string) map[string]any {
	s.t.Helper()
	res, code := s.round(tool, args, extra)
	if res == nil {
		s.t.Fatalf("answer: error %d; want a result", code)
	}
	return res
}

// refused sends one round of a tools/call that the server must refuse
// with a JSON-RPC error, and returns its code.
func (s sessionless) refused(tool, args, extra string) int {
	s.t.Helper()
	res, code := s.round(tool, args, extra)
	if res != nil {
		s.t.Fatalf("answer %v; want an error", res)
	}
	return code
}

// round sends one round of a tools/call and returns its result, or the
// code of its error.
func (s sessionless) round(tool, args, extra string) (map[string]any, int) {
	s.t.Helper()
	body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,` + extra +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}}}`
	res := mcpPostSession(s.t, s.url, "2026-07-28", "", body, map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": tool})
	var msg struct {
		Result map[string]any `json:"result"`
		Error  *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(res, &msg); err != nil || (msg.Result == nil) == (msg.Error == nil) {
		s.t.Fatalf("answer %s: %v", res, err)
	}
	if msg.Error != nil {
		return nil, msg.Error.Code
	}
	return msg.Result, 0
}

// answer is the members of a round that answers question id with state.
func answer(id, state, result string) string {
	return `"inputResponses":{"` + id + `":` + result + `},"requestState":"` + state + `",`
}

// question returns the confirmation question of a result, its message and
// the request state that goes with it; ok is false for a result that asks
// nothing.
func question(r map[string]any) (message, state string, ok bool) {
	q, _ := r["inputRequests"].(map[string]any)
	c, _ := q["carmy/confirm"].(map[string]any)
	params, _ := c["params"].(map[string]any)
	message, _ = params["message"].(string)
	state, _ = r["requestState"].(string)
	return message, state, r["resultType"] == "input_required" && c != nil
}

func toolCode(r map[string]any) string {
	e, _ := r["structuredContent"].(map[string]any)
	if r["isError"] != true || e == nil {
		return ""
	}
	code, _ := e["code"].(string)
	return code
}

const (
	accept = `{"action":"accept","content":{"confirm":true}}`
)

// TestSessionlessConfirmationState: in the sessionless protocol the state
// of a confirmation is bound to the principal, the tool and the input the
// person was shown, is used once and expires with the approval; an answer
// to a question never asked is not taken. Each case starts with a fresh
// server.
func TestSessionlessConfirmationState(t *testing.T) {
	t.Parallel()
	const a, b = `{"text":"A"}`, `{"text":"B"}`
	tests := []struct {
		name string
		// play runs the rounds; it returns the last result and how many
		// runs it wants.
		play func(t *testing.T, s sessionless) (map[string]any, int32)
	}{
		{"the first round asks and runs nothing", func(t *testing.T, s sessionless) (map[string]any, int32) {
			r := s.call("burn_note", a, "")
			if _, _, ok := question(r); !ok {
				t.Fatalf("no question: %v", r)
			}
			return r, 0
		}},
		{"an answer sent unasked is not taken", func(t *testing.T, s sessionless) (map[string]any, int32) {
			r := s.call("burn_note", a, `"inputResponses":{"carmy/confirm":`+accept+`},`)
			if _, _, ok := question(r); !ok {
				t.Fatalf("the answer sent unasked: %v; want the question", r)
			}
			return r, 0
		}},
		{"made-up states are refused", func(t *testing.T, s sessionless) (map[string]any, int32) {
			_, state, _ := question(s.call("burn_note", a, ""))
			for _, made := range []string{"carmy", "carmy/ask:00", "carmy/confirmed:00.9999999999.00", "confirm:burn_note", state + "-TAMPERED", state[:len(state)-1]} {
				if code := s.refused("burn_note", a, answer("carmy/confirm", made, accept)); code != -32602 {
					t.Fatalf("state %q: error %d; want invalid params", made, code)
				}
			}
			return nil, 0
		}},
		{"an answer about A does not run B", func(t *testing.T, s sessionless) (map[string]any, int32) {
			_, state, _ := question(s.call("burn_note", a, ""))
			if code := s.refused("burn_note", b, answer("carmy/confirm", state, accept)); code != -32602 {
				t.Fatalf("B with the state of A: error %d; want invalid params", code)
			}
			return nil, 0
		}},
		{"the answer to the question runs the call once", func(t *testing.T, s sessionless) (map[string]any, int32) {
			msg, state, _ := question(s.call("burn_note", a, ""))
			if !strings.Contains(msg, `"A"`) {
				t.Fatalf("question %q; want the input shown", msg)
			}
			r := s.call("burn_note", a, answer("carmy/confirm", state, accept))
			if r["isError"] == true {
				t.Fatalf("confirmed: %v", r)
			}
			// The same round again: the confirmation was used.
			again := s.call("burn_note", a, answer("carmy/confirm", state, accept))
			if _, _, ok := question(again); !ok {
				t.Fatalf("the same answer again: %v; want a new question", again)
			}
			return r, 1
		}},
		{"decline is permission_denied, and holds", func(t *testing.T, s sessionless) (map[string]any, int32) {
			_, state, _ := question(s.call("burn_note", a, ""))
			r := s.call("burn_note", a, answer("carmy/confirm", state, `{"action":"decline"}`))
			e, _ := r["structuredContent"].(map[string]any)
			d, _ := e["details"].(map[string]any)
			if toolCode(r) != "permission_denied" || d["reason"] != "declined" || e["retryable"] != false {
				t.Fatalf("declined: %v", r)
			}
			if again := s.call("burn_note", a, ""); toolCode(again) != "permission_denied" {
				t.Fatalf("after the decline: %v; want the denial", again)
			}
			return r, 0
		}},
		{"cancel is confirmation_required", func(t *testing.T, s sessionless) (map[string]any, int32) {
			_, state, _ := question(s.call("burn_note", a, ""))
			r := s.call("burn_note", a, answer("carmy/confirm", state, `{"action":"cancel"}`))
			if toolCode(r) != "confirmation_required" {
				t.Fatalf("cancelled: %v", r)
			}
			return r, 0
		}},
		{"an answer that breaks the form is invalid_input", func(t *testing.T, s sessionless) (map[string]any, int32) {
			_, state, _ := question(s.call("burn_note", a, ""))
			r := s.call("burn_note", a, answer("carmy/confirm", state, `{"action":"accept","content":{"confirm":"yes"}}`))
			e, _ := r["structuredContent"].(map[string]any)
			fields, _ := e["fields"].([]any)
			if toolCode(r) != "invalid_input" || len(fields) != 1 || fields[0].(map[string]any)["path"] != "confirm" {
				t.Fatalf("a string for a boolean: %v", r)
			}
			return r, 0
		}},
		{"the question expires with the approval", func(t *testing.T, s sessionless) (map[string]any, int32) {
			_, state, _ := question(s.call("burn_note", a, ""))
			time.Sleep(300 * time.Millisecond) // past the approval timeout
			r := s.call("burn_note", a, answer("carmy/confirm", state, accept))
			if _, _, ok := question(r); !ok {
				t.Fatalf("an answer past the approval's expiry: %v; want a new question", r)
			}
			return r, 0
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var burns atomic.Int32
			burn := carmy.Tool(func(in HostNote) error { burns.Add(1); return nil }, carmy.Destructive,
				carmy.Name("burn_note"), carmy.RequireConfirmation(), carmy.Register(false))
			b := carmy.New().Tool(burn).ElicitConfirmation().Logger(quietLogger())
			if strings.Contains(tt.name, "expires") {
				b.ApprovalTimeout(200 * time.Millisecond)
			}
			reg := build(t, b)
			srv := serve(t, reg)
			_, want := tt.play(t, sessionless{t, srv.URL})
			if got := burns.Load(); got != want {
				t.Fatalf("burn_note ran %d times; want %d", got, want)
			}
		})
	}
}

// Ask is the input of ask_then_burn's own question.
type Ask struct {
	Reason string `json:"reason"`
}

// TestSessionlessConfirmationHoldsForTheToolsRounds: a confirmation given
// holds for the rounds that the tool's own questions add, once each: the
// state a round hands on is not taken twice, nor for another input.
func TestSessionlessConfirmationHoldsForTheToolsRounds(t *testing.T) {
	t.Parallel()
	var runs, done atomic.Int32
	tool := carmy.Tool(func(ctx carmy.Context, in HostNote) (string, error) {
		runs.Add(1)
		var ask Ask
		if ok, err := ctx.Elicit("why?", &ask); err != nil || !ok {
			return "", err
		}
		done.Add(1)
		return ask.Reason, nil
	}, carmy.Destructive, carmy.Name("ask_then_burn"), carmy.RequireConfirmation(), carmy.Register(false))
	reg := build(t, carmy.New().Tool(tool).ElicitConfirmation().Logger(quietLogger()))
	srv := serve(t, reg)
	s := sessionless{t, srv.URL}
	const in = `{"text":"x"}`
	_, state, _ := question(s.call("ask_then_burn", in, ""))
	r := s.call("ask_then_burn", in, answer("carmy/confirm", state, accept))
	confirmed, _ := r["requestState"].(string)
	if q, _ := r["inputRequests"].(map[string]any); q["ask"] == nil || len(q) != 1 || confirmed == state {
		t.Fatalf("after the confirmation: %v; want the tool's question", r)
	}
	reason := answer("ask", confirmed, `{"action":"accept","content":{"reason":"because"}}`)
	if code := s.refused("ask_then_burn", `{"text":"y"}`, reason); code != -32602 {
		t.Fatalf("another input with the confirmed state: error %d; want invalid params", code)
	}
	if r := s.call("ask_then_burn", in, reason); r["isError"] == true || r["resultType"] == "input_required" {
		t.Fatalf("the tool's round: %v; want the result", r)
	}
	if r := s.call("ask_then_burn", in, reason); r["resultType"] != "input_required" {
		t.Fatalf("the confirmed state a second time: %v; want a new confirmation question", r)
	} else if _, _, ok := question(r); !ok {
		t.Fatalf("the confirmed state a second time: %v; want the confirmation question", r)
	}
	if done.Load() != 1 {
		t.Fatalf("the tool finished %d times; want 1", done.Load())
	}
}
