package mcpserve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpserve"
)

// rounds serves a tool of the sessionless protocol that asks its caller's
// name and answers with it, through a server that keeps its rounds' state
// with key, and posts rounds to it.
type rounds struct {
	t   *testing.T
	url string
}

func newRounds(t *testing.T, key []byte) rounds {
	h := &host{run: func(ctx context.Context, c *mcpserve.Call) (mcpserve.Outcome, error) {
		res, err := c.Peer.Elicit(ctx, "name", &mcp.ElicitParams{Message: "name?", RequestedSchema: map[string]any{"type": "object"}})
		if errors.Is(err, mcpserve.ErrNeedsInput) {
			return mcpserve.Outcome{Err: wireError{"code": "unavailable"}}, nil
		}
		if err != nil {
			return mcpserve.Outcome{}, err
		}
		out, _ := json.Marshal(res.Content)
		return mcpserve.Outcome{Output: out}, nil
	}}
	state := &mcpserve.State{Signer: mcpserve.NewSigner(key, nil), TTL: time.Minute}
	srv := httptest.NewServer(mcpserve.New(mcpserve.Config{Host: h, Tools: tools(), BodyLimit: 1 << 20, State: state}).HTTPHandler())
	t.Cleanup(srv.Close)
	return rounds{t, srv.URL}
}

// post sends one round as who, with the arguments and the members that
// carry the answers and the state (a JSON fragment ending in a comma, or
// ""), and returns its result, or the code of its error.
func (r rounds) post(who, args, extra string) (map[string]any, int) {
	r.t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"object","arguments":` + args + `,` + extra +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}}}`
	req, _ := http.NewRequest("POST", r.url, strings.NewReader(body))
	for k, v := range map[string]string{"X-Who": who, "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "object"} {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	var msg struct {
		Result map[string]any `json:"result"`
		Error  *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b.Bytes(), &msg); err != nil {
		r.t.Fatalf("answer %s: %v", b.Bytes(), err)
	}
	if msg.Error != nil {
		return nil, msg.Error.Code
	}
	return msg.Result, 0
}

// TestRoundsSealed: the state the door hands a sessionless client is
// sealed over the caller, the tool and the input with the host's key: the
// next round of the same call gets its answer; the same state with
// another input, from another caller, or sealed with another key, is
// invalid params before the host runs; an answer sent without the state
// is not taken.
func TestRoundsSealed(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte{1}, mcpserve.MinKeySize)
	r := newRounds(t, key)
	const in, answer = `{"a":1}`, `"inputResponses":{"name":{"action":"accept","content":{"name":"Ada"}}},`
	first, _ := r.post("me", in, "")
	state, _ := first["requestState"].(string)
	if first["resultType"] != "input_required" || state == "" {
		t.Fatalf("first round %v; want the question and a state", first)
	}
	echo := answer + `"requestState":"` + state + `",`
	other := newRounds(t, bytes.Repeat([]byte{2}, mcpserve.MinKeySize))
	for _, tt := range []struct {
		name string
		r    rounds
		who  string
		args string
	}{
		{"another input", r, "me", `{"a":2}`},
		{"another caller", r, "you", in},
		{"another key", other, "me", in},
	} {
		if res, code := tt.r.post(tt.who, tt.args, echo); code != -32602 {
			t.Errorf("%s: %v, error %d; want invalid params", tt.name, res, code)
		}
	}
	if res, _ := r.post("me", in, answer); res["resultType"] != "input_required" {
		t.Errorf("an answer without the state: %v; want the question again", res)
	}
	res, code := r.post("me", ` { "a" : 1 } `, echo)
	if sc, _ := res["structuredContent"].(map[string]any); code != 0 || sc["name"] != "Ada" {
		t.Errorf("the next round: %v, error %d; want the answer taken", res, code)
	}
}
