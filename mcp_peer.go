//lint:file-ignore SA1019 MCP's logging is deprecated from 2026-07-28 on, and still served to the clients that use it.

package carmy

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpwire"
)

// mcpPeer is the MCP client that a tools/call came from, as the tool's
// [Context] reaches it: the request (its progress token, the client's
// capabilities, the answers of earlier rounds) and the session that
// carries notifications back.
type mcpPeer struct {
	req *mcp.CallToolRequest
	// sessionless is a call of the sessionless protocol, where the server never sends the
	// client a request: a question goes back in the call's result, and the
	// client calls again with the answer (multi-round results).
	sessionless bool
	// single is a call that came over a transport of one client (stdio,
	// ServeMCP), whose application is the person's own channel.
	single bool

	mu    sync.Mutex
	asked int                 // questions asked in this run of the tool
	need  mcp.InputRequestMap // sessionless: the questions for the client's next round
	state string              // sessionless: what the next round must echo (a confirmation given)
}

type peerKey struct{}

// peerOf returns the MCP client of the call that ctx serves, nil for a
// call that did not come over MCP.
func peerOf(ctx context.Context) *mcpPeer {
	p, _ := ctx.Value(peerKey{}).(*mcpPeer)
	return p
}

func newPeer(req *mcp.CallToolRequest) *mcpPeer {
	extra := req.GetExtra()
	return &mcpPeer{req: req, sessionless: req.ProtocolVersion() >= mcpwire.SessionlessProtocol,
		single: extra == nil || (extra.TokenInfo == nil && extra.Header == nil)}
}

// The first protocol versions with form elicitation, and with URL
// elicitation: a client of an earlier version is never asked, whatever
// capabilities it declares.
const (
	formProtocol = "2025-06-18"
	urlProtocol  = "2025-11-25"
)

// canElicit reports whether the client said it can ask its user for a
// form's fields, in a protocol version that has forms.
func (p *mcpPeer) canElicit() bool {
	c := p.req.ClientCapabilities()
	if c == nil || c.Elicitation == nil || p.req.ProtocolVersion() < formProtocol {
		return false
	}
	// A client that declares neither mode is taken to mean forms.
	return c.Elicitation.Form != nil || c.Elicitation.URL == nil
}

// canElicitURL reports whether the client said it can send its user to a
// web page, in a protocol version that has URL elicitation.
func (p *mcpPeer) canElicitURL() bool {
	c := p.req.ClientCapabilities()
	return c != nil && c.Elicitation != nil && c.Elicitation.URL != nil && p.req.ProtocolVersion() >= urlProtocol
}

// elicit asks the client's user to fill in a form. In a session it sends
// the question and waits for the answer. In the sessionless protocol the
// answer to the n-th question of this run is in the call's input
// responses; a question with no answer yet is recorded for the next round
// and elicit returns errNeedsInput, which the call then turns into an
// input-required result.
func (p *mcpPeer) elicit(ctx context.Context, params *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	p.mu.Lock()
	p.asked++
	id := "carmy/elicit/" + strconv.Itoa(p.asked)
	p.mu.Unlock()
	return p.ask(ctx, id, params)
}

// ask puts one question to the client, under the id it answers to in the
// sessionless protocol.
//
// In a session, an accepted answer that breaks the form is returned as the
// client sent it, for the caller to check and to name the fields that
// break it: the SDK only says that it does not match.
func (p *mcpPeer) ask(ctx context.Context, id string, params *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if !p.sessionless {
		sent := &sentAnswer{}
		res, err := p.req.Session.Elicit(context.WithValue(ctx, sentAnswerKey{}, sent), params)
		if err != nil && sent.res != nil && sent.res.Action == "accept" && params.Mode != "url" {
			return sent.res, nil
		}
		return res, err
	}
	if res, ok := p.req.Params.InputResponses[id].(*mcp.ElicitResult); ok {
		return res, nil
	}
	p.question(id, params)
	return nil, needsInput()
}

// question records a question for the client's next round of the
// sessionless protocol.
func (p *mcpPeer) question(id string, params *mcp.ElicitParams) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.need == nil {
		p.need = mcp.InputRequestMap{}
	}
	p.need[id] = params
}

// sentAnswer holds the answer a client sent to an elicitation of a
// session, as the SDK received it.
type sentAnswer struct{ res *mcp.ElicitResult }

type sentAnswerKey struct{}

// keepSentAnswer is sending middleware of the MCP server that keeps the
// answer to an elicitation for the asker that wants it, before the SDK
// checks it against the form.
func keepSentAnswer(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if sent, ok := ctx.Value(sentAnswerKey{}).(*sentAnswer); ok {
			if r, ok := res.(*mcp.ElicitResult); ok {
				sent.res = r
			}
		}
		return res, err
	}
}

// errNeedsInput is the cause of the error that ends a run of a tool whose
// question the client of the sessionless protocol has not answered yet:
// the client gets the question and calls again with the answer, and the
// tool runs again from the start.
var errNeedsInput = errors.New("waiting for the user's answer")

// needsInput is that error as the tool and the runtime see it: retryable,
// so that an idempotency record never keeps it.
func needsInput() *Error {
	return &Error{
		Code:      CodeUnavailable,
		Message:   "the tool needs an answer from the user first; the client asks them and calls again with the answer",
		Retryable: true,
		Err:       errNeedsInput,
	}
}

// inputRequired is the result that asks the client the questions of this
// run, or nil when there are none.
func (p *mcpPeer) inputRequired() *mcp.CallToolResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.need == nil {
		return nil
	}
	state := p.state
	if state == "" {
		state = "carmy"
	}
	return &mcp.CallToolResult{InputRequests: p.need, RequestState: state}
}

// progress notifies the client of the call's progress, if it asked for it
// with a progress token.
func (p *mcpPeer) progress(ctx context.Context, done, total float64, msg string) {
	token := p.req.Params.GetProgressToken()
	if token == nil || p.req.Session == nil {
		return
	}
	_ = p.req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: done, Total: total, Message: msg})
}

// log sends a log message to the client, which gets it only at or above
// the level it chose.
func (p *mcpPeer) log(ctx context.Context, level slog.Level, msg string, args []any) {
	if p.req.Session == nil {
		return
	}
	var data any = msg
	if len(args) > 0 {
		fields := map[string]any{"message": msg}
		r := slog.NewRecord(time.Time{}, level, msg, 0)
		r.Add(args...)
		r.Attrs(func(a slog.Attr) bool {
			fields[a.Key] = a.Value.Resolve().Any()
			return true
		})
		data = fields
	}
	_ = p.req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: mcpwire.Level(level), Logger: "carmy", Data: data})
}

// confirmKey is the id of the confirmation question in the sessionless
// protocol's input requests.
const confirmKey = "carmy/confirm"

func (p *mcpPeer) setState(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state = s
}
