//lint:file-ignore SA1019 MCP's logging is deprecated from 2026-07-28 on, and still served to the clients that use it.

package mcpserve

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy/internal/mcpclient"
	"github.com/carmy-dev/carmy/internal/mcpwire"
)

// Peer is the MCP client that a tools/call came from, as the tool that
// serves the call reaches it: the request (its progress token, the
// client's capabilities, the answers of earlier rounds) and the session
// that carries notifications back. The door hands it to the host with the
// call ([Call].Peer), and the host hands it to the tool; nothing finds it
// in a context.
type Peer struct {
	req *mcp.CallToolRequest
	// sessionless is a call of the sessionless protocol, where the server
	// never sends the client a request: a question goes back in the call's
	// result, and the client calls again with the answer (multi-round
	// results).
	sessionless bool
	// single is a call that came over a transport of one client (stdio,
	// ServeMCP), whose application is the person's own channel.
	single bool
	// form is where the server confirms calls by form.
	form FormConfirmation
	// waitEvery is how often a request that waits for a person sends its
	// client progress (KeepWaiting); 0 is [WaitProgressEvery].
	waitEvery time.Duration

	mu    sync.Mutex
	asked map[string]int      // questions asked in this run, by name
	ids   map[string]bool     // the ids they went by
	need  mcp.InputRequestMap // sessionless: the questions for the client's next round
	state string              // sessionless: what the host keeps across rounds (a confirmation given)
	// sessionless: the state the client's next round must echo, as the
	// host sealed it; the answers of this round that the host took, and
	// the state it found under the seal.
	sealed  string
	answers mcp.InputResponseMap
	inner   string
	// rounds binds a call of the sessionless protocol to the host's state
	// across rounds; its state is nil in a session, or where the host
	// keeps none. A value, not a pointer: a call costs no allocation more.
	rounds rounds
	// inbox holds the questions of a task's peer (TaskPeer).
	inbox *inbox
	// asking is told when a session's task (TaskPeer) starts waiting for
	// an answer and when it has them all; waiting counts its questions.
	asking  func(waiting bool)
	waiting int
	// task is the id of the session's task whose questions this peer asks.
	task string
	// progressed and total are the last progress sent for the request,
	// if sent: MCP wants each notification's value greater than the one
	// before.
	progressed, total float64
	sent              bool
}

func newPeer(req *mcp.CallToolRequest, cfg *Config) *Peer {
	extra := req.GetExtra()
	return &Peer{req: req, sessionless: req.ProtocolVersion() >= mcpwire.SessionlessProtocol,
		single: extra == nil || (extra.TokenInfo == nil && extra.Header == nil), form: cfg.FormConfirmation, waitEvery: cfg.WaitProgress}
}

// FormConfirmation is where a call that needs confirmation is confirmed by
// a form that the client shows its user.
type FormConfirmation int8

const (
	FormOnSingle   FormConfirmation = iota // over single-client transports (stdio) only
	FormEverywhere                         // over HTTP too
	FormNever                              // nowhere: a client can accept a form on its own
)

// ConfirmsByForm reports whether a call that needs confirmation is
// confirmed by a form that the client shows its user: where the server's
// [FormConfirmation] applies, to a client that can show forms.
func (p *Peer) ConfirmsByForm() bool {
	switch p.form {
	case FormEverywhere:
	case FormNever:
		return false
	default:
		if !p.single {
			return false
		}
	}
	return p.CanElicit()
}

// Sessionless reports whether the call is of the sessionless protocol,
// where a question goes back in the call's result rather than as a request.
func (p *Peer) Sessionless() bool { return p.sessionless }

// TakesTasks reports whether the call is of the sessionless protocol from
// a client that declared the tasks extension. Nil takes none.
func (p *Peer) TakesTasks() bool {
	return p != nil && p.sessionless && p.req.Params != nil && DeclaresTasks(p.req.Params.Meta)
}

// Single reports whether the call came over a transport of one client
// (stdio, ServeMCP), whose application is the person's own channel.
func (p *Peer) Single() bool { return p.single }

// The first protocol versions with form elicitation, and with URL
// elicitation: a client of an earlier version is never asked, whatever
// capabilities it declares.
const (
	formProtocol = "2025-06-18"
	urlProtocol  = "2025-11-25"
)

// callerOf is what a client that declared caps can answer in protocol
// version: forms and pages only in a version that has them.
func callerOf(caps *mcp.ClientCapabilities, version string) mcpclient.Caller {
	var k mcpclient.Caller
	if caps == nil {
		return k
	}
	if e := caps.Elicitation; e != nil {
		// A client that declares neither mode is taken to mean forms.
		k.Elicit = version >= formProtocol && (e.Form != nil || e.URL == nil)
		k.ElicitURL = version >= urlProtocol && e.URL != nil
	}
	k.Sample = caps.Sampling != nil
	return k
}

// Caller is what the client said it can answer: forms, pages, sampling.
func (p *Peer) Caller() mcpclient.Caller {
	return callerOf(p.req.ClientCapabilities(), p.req.ProtocolVersion())
}

// CanElicit reports whether the client said it can ask its user for a
// form's fields, in a protocol version that has forms.
func (p *Peer) CanElicit() bool { return p.Caller().Elicit }

// CanElicitURL reports whether the client said it can send its user to a
// web page, in a protocol version that has URL elicitation.
func (p *Peer) CanElicitURL() bool { return p.Caller().ElicitURL }

// Elicit asks the client's user to fill in a form. In a session it sends
// the question and waits for the answer. In the sessionless protocol the
// answer is in the call's input responses, under the question's id: name
// for the first question of that name in this run of the tool, name_2 for
// the second, and so on, so that a run that asks the same questions in the
// same order finds the answers of the rounds before. A question with no
// answer yet is recorded for the next round and Elicit returns
// [ErrNeedsInput], which the call then turns into an input-required
// result; the questions asked after it go in the same round.
func (p *Peer) Elicit(ctx context.Context, name string, params *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	return p.Ask(ctx, p.idFor(name), params)
}

// idFor is the id of the next question of name in this run: name, then
// name_2, name_3, skipping an id taken already, so that every question of
// a run has its own.
func (p *Peer) idFor(name string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.asked == nil {
		p.asked, p.ids = map[string]int{}, map[string]bool{}
	}
	id := name
	for {
		p.asked[name]++
		if n := p.asked[name]; n > 1 {
			id = name + "_" + strconv.Itoa(n)
		}
		if !p.ids[id] {
			p.ids[id] = true
			return id
		}
	}
}

// Ask puts one question to the client, under the id it answers to in the
// sessionless protocol.
//
// In a session, an accepted answer that breaks the form is returned as the
// client sent it, for the caller to check and to name the fields that
// break it: the SDK only says that it does not match.
func (p *Peer) Ask(ctx context.Context, id string, params *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	if p.inbox != nil {
		if res, ok := p.Answer(id); ok { // answered in the round that started the task
			return res, nil
		}
		return p.inbox.ask(ctx, id, params)
	}
	if !p.sessionless {
		if p.asking != nil {
			p.waitFor(1)
			defer p.waitFor(-1)
		}
		if p.task != "" {
			tied := *params
			tied.Meta = mcp.Meta{relatedTaskMeta: map[string]string{"taskId": p.task}}
			for k, v := range params.Meta {
				tied.Meta[k] = v
			}
			params = &tied
		}
		sent := &sentAnswer{}
		res, err := p.req.Session.Elicit(context.WithValue(ctx, sentAnswerKey{}, sent), params)
		if err != nil && sent.res != nil && sent.res.Action == "accept" && params.Mode != "url" {
			return sent.res, nil
		}
		return res, err
	}
	if res, ok := p.Answer(id); ok {
		return res, nil
	}
	p.Question(id, params)
	return nil, ErrNeedsInput
}

// Answer is the client's answer, in this round of the sessionless
// protocol, to the question asked under id in an earlier round: one the
// host took ([Peer.Take]), never one the client sent unasked.
func (p *Peer) Answer(id string) (*mcp.ElicitResult, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	res, ok := p.answers[id].(*mcp.ElicitResult)
	return res, ok
}

// Take sets what the host read from the state the client echoed, having
// checked it: the answers to the questions it asked, and the state it
// kept across rounds, which [Peer.RequestState] then returns.
func (p *Peer) Take(answers mcp.InputResponseMap, inner string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answers, p.inner = answers, inner
}

// Asked returns the ids of the questions for the client's next round,
// sorted (none when the run asked nothing), the answers taken in this one
// ([Peer.Take]), which the next round needs too since the tool runs again
// from the start, and the state set for it ([Peer.SetState]).
func (p *Peer) Asked() (ids []string, answered mcp.InputResponseMap, state string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := range p.need {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, p.answers, p.state
}

// Seal sets the state that the client's next round must echo: the host's
// sealed form of [Peer.Asked].
func (p *Peer) Seal(state string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sealed = state
}

// Question records a question for the client's next round of the
// sessionless protocol.
func (p *Peer) Question(id string, params mcp.InputRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.need == nil {
		p.need = mcp.InputRequestMap{}
	}
	p.need[id] = params
}

// RequestState is the state the host kept from the server's previous
// round of the sessionless protocol, as [Peer.Take] set it.
func (p *Peer) RequestState() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inner
}

// SetState sets the state that the host keeps for the client's next round
// of the sessionless protocol, under its seal.
func (p *Peer) SetState(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state = s
}

// ElicitationComplete tells the client of a session that the URL
// elicitation id is complete.
func (p *Peer) ElicitationComplete(ctx context.Context, id string) {
	if p.sessionless || p.req.Session == nil {
		return
	}
	_ = p.req.Session.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: id})
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

// ErrNeedsInput ends a run of a tool whose question the client of the
// sessionless protocol has not answered yet: the client gets the question
// and calls again with the answer, and the tool runs again from the start.
var ErrNeedsInput = errors.New("waiting for the user's answer")

// inputRequired is the result that asks the client the questions of this
// run, or nil when there are none.
func (p *Peer) inputRequired() *mcp.CallToolResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.need == nil {
		return nil
	}
	return &mcp.CallToolResult{InputRequests: p.need, RequestState: p.sealed}
}

// WantsProgress reports whether the client gave the call a progress
// token, over a connection that carries notifications.
func (p *Peer) WantsProgress() bool {
	return p.req.Params.GetProgressToken() != nil && p.req.Session != nil
}

// Progress notifies the client of the call's progress, if it asked for it
// with a progress token. A value not greater than the last one sent for
// the request (a tool that starts at 0 after the request waited for a
// person) is sent as the least value greater than it, as MCP requires.
func (p *Peer) Progress(ctx context.Context, done, total float64, msg string) {
	token := p.req.Params.GetProgressToken()
	if token == nil || p.req.Session == nil {
		return
	}
	p.mu.Lock()
	if p.sent && !(done > p.progressed) { // NaN too
		done = math.Nextafter(p.progressed, math.Inf(1))
	}
	p.progressed, p.total, p.sent = done, total, true
	p.mu.Unlock()
	_ = p.req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: done, Total: total, Message: msg})
}

// WaitProgressEvery is how often a request that waits for a person sends
// its client progress: well within the 30 or 60 seconds after which
// clients give up on a request by default, unless progress resets their
// timeout.
const WaitProgressEvery = 5 * time.Second

// KeepWaiting sends the client progress with msg every few seconds while
// the request waits for a person (a form the client shows, a page the
// person opens, their decision there), when the client gave the call a
// progress token, so that a client that resets its timeout on progress
// keeps waiting. Each notification repeats the last progress sent, but for
// the least increase MCP requires, so what a tool reported stands. The
// function it returns stops it, once the wait is over. A task's peer holds
// no request, and sends nothing.
func (p *Peer) KeepWaiting(ctx context.Context, msg string) (stop func()) {
	if !p.WantsProgress() || p.inbox != nil || p.asking != nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(cmp.Or(p.waitEvery, WaitProgressEvery))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			p.mu.Lock()
			total := p.total
			p.mu.Unlock()
			p.Progress(ctx, 0, total, msg) // the least increase
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// Log sends a log message to the client, which gets it only at or above
// the level it chose. args are key-value pairs or [slog.Attr] values; the
// client gets them as the fields of an object beside "message".
func (p *Peer) Log(ctx context.Context, level slog.Level, msg string, args []any) {
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

// MissingCapability is the error of a question put to a client that did
// not declare the capability that answers it. In the sessionless protocol,
// a call that ends with it is answered with the protocol's error for it
// ([MissingCapability.RPCError]).
type MissingCapability struct {
	// Capability is the client capability the question needs:
	// "elicitation".
	Capability string
}

func (m *MissingCapability) Error() string {
	return "the client did not declare the " + m.Capability + " capability"
}

// RPCError is the JSON-RPC error of a call that needs the capability
// (-32021, over HTTP with status 400), naming it in the form of the
// client capabilities the client would declare.
func (m *MissingCapability) RPCError() *jsonrpc.Error {
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{m.Capability: map[string]any{}}})
	return &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Message: "missing required client capability: " + m.Capability, Data: data}
}

// waitFor counts a question of a session's task that starts (+1) or stops
// (-1) waiting for its answer, and tells asking when the task starts and
// stops waiting.
func (p *Peer) waitFor(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waiting += n
	if p.waiting == n && n > 0 || p.waiting == 0 && n < 0 {
		p.asking(p.waiting > 0)
	}
}

// CanSample reports whether the client said it can sample.
func (p *Peer) CanSample() bool { return p.Caller().Sample }

// Sample asks the client to sample (sampling/createMessage), for an
// upstream that asks during the call it serves: params and the result are
// JSON. A client of a session is asked at once. In the sessionless
// protocol the question goes by name, as [Peer.Elicit]'s do: the answer
// of an earlier round under its id, else the question is recorded for the
// next round and Sample returns [ErrNeedsInput]. A client that did not
// declare sampling gets [MissingCapability].
func (p *Peer) Sample(ctx context.Context, name string, params json.RawMessage) (json.RawMessage, error) {
	if !p.CanSample() {
		return nil, &MissingCapability{Capability: "sampling"}
	}
	if p.sessionless && p.inbox == nil {
		id := p.idFor(name)
		p.mu.Lock()
		res := p.answers[id]
		p.mu.Unlock()
		switch res.(type) {
		case *mcp.CreateMessageResult, *mcp.CreateMessageWithToolsResult:
			return json.Marshal(res)
		}
		var q mcp.CreateMessageWithToolsParams
		if err := json.Unmarshal(params, &q); err != nil {
			return nil, err
		}
		p.Question(id, &q)
		return nil, ErrNeedsInput
	}
	if p.sessionless || p.req.Session == nil {
		return nil, errors.New("the client cannot be asked to sample in the middle of a call")
	}
	var q mcp.CreateMessageParams
	if err := json.Unmarshal(params, &q); err != nil {
		return nil, err
	}
	res, err := p.req.Session.CreateMessage(ctx, &q)
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}
