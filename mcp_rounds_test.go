package carmy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// Seat and Meal are the forms of book's two questions.
type (
	Seat struct {
		Seat string `json:"seat"`
	}
	Meal struct {
		Meal string `json:"meal"`
	}
)

// roundsServer serves book, which asks its two questions at once, and
// booked counts the bookings it made.
func roundsServer(t *testing.T) (url string, booked *atomic.Int32) {
	t.Helper()
	booked = new(atomic.Int32)
	book := carmy.Tool(func(ctx carmy.Context, in HostNote) (string, error) {
		var seat Seat
		var meal Meal
		_, errSeat := ctx.Elicit("Which seat?", &seat)
		_, errMeal := ctx.Elicit("Which meal?", &meal)
		if err := errors.Join(errSeat, errMeal); err != nil {
			return "", err
		}
		booked.Add(1)
		return in.Text + ": " + seat.Seat + ", " + meal.Meal, nil
	}, carmy.Write, carmy.Name("book"), carmy.Register(false))
	step := carmy.Tool(func(ctx carmy.Context, in HostNote) (string, error) {
		var seat Seat
		if ok, err := ctx.Elicit("Which seat?", &seat); err != nil || !ok {
			return "", err
		}
		var meal Meal
		if ok, err := ctx.Elicit("Which meal?", &meal); err != nil || !ok {
			return "", err
		}
		booked.Add(1)
		return seat.Seat + ", " + meal.Meal, nil
	}, carmy.Write, carmy.Name("book_step"), carmy.Register(false))
	reg := build(t, carmy.New().Tool(book, step).Logger(quietLogger()))
	srv := serve(t, reg)
	return srv.URL, booked
}

const (
	seatA = `{"action":"accept","content":{"seat":"12A"}}`
	mealV = `{"action":"accept","content":{"meal":"veg"}}`
)

// asked returns the ids of the questions of a result, and its state.
func asked(r map[string]any) (ids []string, state string) {
	q, _ := r["inputRequests"].(map[string]any)
	for id := range q {
		ids = append(ids, id)
	}
	state, _ = r["requestState"].(string)
	return ids, state
}

// TestSessionlessElicitRounds: a tool's own questions in the sessionless
// protocol: several in one round, several rounds, the state signed and
// bound to the call; a state that does not verify is invalid params and
// runs nothing; an answer to a question the state does not name is not
// taken.
func TestSessionlessElicitRounds(t *testing.T) {
	t.Parallel()
	const in = `{"text":"trip"}`
	tests := []struct {
		name string
		play func(t *testing.T, s sessionless) int32 // how many bookings it wants
	}{
		{"two questions in one round", func(t *testing.T, s sessionless) int32 {
			ids, state := asked(s.call("book", in, ""))
			if len(ids) != 2 || !strings.Contains(strings.Join(ids, ","), "seat") || !strings.Contains(strings.Join(ids, ","), "meal") {
				t.Fatalf("asked %v; want seat and meal at once", ids)
			}
			r := s.call("book", in, `"inputResponses":{"seat":`+seatA+`,"meal":`+mealV+`},"requestState":"`+state+`",`)
			if got := fmt.Sprint(r["structuredContent"]); !strings.Contains(got, "trip: 12A, veg") {
				t.Fatalf("answered: %v", r)
			}
			return 1
		}},
		{"one question per round, the state carrying the first answer", func(t *testing.T, s sessionless) int32 {
			ids, state1 := asked(s.call("book_step", in, ""))
			if len(ids) != 1 || ids[0] != "seat" {
				t.Fatalf("round 1 asked %v", ids)
			}
			ids, state2 := asked(s.call("book_step", in, answer("seat", state1, seatA)))
			if len(ids) != 1 || ids[0] != "meal" || state2 == state1 {
				t.Fatalf("round 2 asked %v with state %q", ids, state2)
			}
			r := s.call("book_step", in, answer("meal", state2, mealV))
			if got := fmt.Sprint(r["structuredContent"]); !strings.Contains(got, "12A, veg") {
				t.Fatalf("round 3: %v", r)
			}
			return 1
		}},
		{"a missing answer is asked again", func(t *testing.T, s sessionless) int32 {
			_, state := asked(s.call("book", in, ""))
			ids, _ := asked(s.call("book", in, answer("seat", state, seatA)))
			if len(ids) != 1 || ids[0] != "meal" {
				t.Fatalf("asked %v; want the meal again", ids)
			}
			return 0
		}},
		{"answers sent unasked are not taken", func(t *testing.T, s sessionless) int32 {
			r := s.call("book", in, `"inputResponses":{"seat":`+seatA+`,"meal":`+mealV+`},`)
			if ids, _ := asked(r); len(ids) != 2 {
				t.Fatalf("answers without a state: %v; want both questions asked", r)
			}
			return 0
		}},
		{"an answer to a question the state does not name is not taken", func(t *testing.T, s sessionless) int32 {
			_, state := asked(s.call("book_step", in, ""))
			r := s.call("book_step", in, `"inputResponses":{"seat":`+seatA+`,"meal":`+mealV+`},"requestState":"`+state+`",`)
			if ids, _ := asked(r); len(ids) != 1 || ids[0] != "meal" {
				t.Fatalf("the meal answered before it was asked: %v; want it asked", r)
			}
			return 0
		}},
		{"a tampered or foreign state is invalid params", func(t *testing.T, s sessionless) int32 {
			_, state := asked(s.call("book", in, ""))
			both := func(st string) string {
				return `"inputResponses":{"seat":` + seatA + `,"meal":` + mealV + `},"requestState":"` + st + `",`
			}
			cut := strings.LastIndex(state, ".")
			for name, st := range map[string]string{
				"tampered":          state + "-TAMPERED",
				"payload changed":   state[:cut-1] + "x" + state[cut:],
				"made up":           "carmy/round:e30.00",
				"not carmy's":       "opaque",
				"another signature": state[:cut+1] + strings.Repeat("0", len(state)-cut-1),
			} {
				if code := s.refused("book", in, both(st)); code != -32602 {
					t.Fatalf("%s: error %d; want invalid params", name, code)
				}
			}
			if code := s.refused("book", `{"text":"another trip"}`, both(state)); code != -32602 {
				t.Fatalf("the state of another input: error %d; want invalid params", code)
			}
			if code := s.refused("book_step", in, both(state)); code != -32602 {
				t.Fatalf("the state of another tool: error %d; want invalid params", code)
			}
			return 0
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url, booked := roundsServer(t)
			if want := tt.play(t, sessionless{t, url}); booked.Load() != want {
				t.Fatalf("booked %d times; want %d", booked.Load(), want)
			}
		})
	}
}

// TestElicitBothGenerations: the same tool code asks its questions in a
// session (requests) and in the sessionless protocol (rounds, which the
// SDK's client answers and calls again), with the same result.
func TestElicitBothGenerations(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			url, booked := roundsServer(t)
			var asked atomic.Int32
			opts := &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked.Add(1)
					if strings.Contains(req.Params.Message, "seat") {
						return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"seat": "3C"}}, nil
					}
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"meal": "fish"}}, nil
				},
			}
			s := mcpConnect(t, url, version, opts)
			for _, tool := range []string{"book", "book_step"} {
				r, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "t"}})
				if err != nil || r.IsError || !strings.Contains(fmt.Sprint(r.StructuredContent), "3C, fish") {
					t.Fatalf("%s: %+v, %v", tool, r, err)
				}
			}
			if booked.Load() != 2 || asked.Load() != 4 {
				t.Fatalf("booked %d, asked %d; want 2 and 4", booked.Load(), asked.Load())
			}
		})
	}
}

// TestSessionlessUndeclaredCapability: a client of the sessionless
// protocol that did not declare elicitation is not asked; the tool gets
// Elicit's error, and returned, it is the protocol's missing capability
// error (-32021) with status 400, naming elicitation.
func TestSessionlessUndeclaredCapability(t *testing.T) {
	t.Parallel()
	url, booked := roundsServer(t)
	status, body := sessionlessPost(t, url, "book", `{"text":"x"}`, nil)
	var msg struct {
		Error *struct {
			Code int `json:"code"`
			Data struct {
				Required map[string]any `json:"requiredCapabilities"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &msg); err != nil || msg.Error == nil {
		t.Fatalf("status %d, %s: %v", status, body, err)
	}
	if status != http.StatusBadRequest || msg.Error.Code != -32021 || msg.Error.Data.Required["elicitation"] == nil || booked.Load() != 0 {
		t.Fatalf("status %d, %s, booked %d; want 400, -32021 naming elicitation, nothing booked", status, body, booked.Load())
	}
}

// TestSessionlessStream: in the sessionless protocol a call's response
// carries no request of the server's (a question goes in the result) and
// no log message unless the request set a log level.
func TestSessionlessStream(t *testing.T) {
	t.Parallel()
	url, _ := roundsServer(t)
	logReg, err := carmy.New().Logger(quietLogger()).Tool(carmy.Tool(func(ctx carmy.Context, _ HostNote) error {
		ctx.Log(slog.LevelWarn, "careful")
		return nil
	}, carmy.None, carmy.Name("warn"), carmy.Register(false))).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer logReg.Close()
	logSrv := serve(t, logReg)

	post := func(url, tool, meta string) string {
		body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"text":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` + meta + `}}}`
		req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
		for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": tool} {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = fmt.Fprint(&b, resp.Header.Get("Content-Type"), "\n")
		buf := make([]byte, 1<<16)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return b.String()
	}
	// Every message on the response: none is a request (a method with an id).
	stream := post(url, "book", `"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}`)
	for _, line := range strings.Split(stream, "\n") {
		line = strings.TrimPrefix(line, "data: ")
		var m struct {
			ID     any    `json:"id"`
			Method string `json:"method"`
		}
		if json.Unmarshal([]byte(line), &m) == nil && m.Method != "" && m.ID != nil {
			t.Fatalf("a request on the response stream: %s", line)
		}
	}
	if !strings.Contains(stream, `"input_required"`) {
		t.Fatalf("response %s; want the questions in the result", stream)
	}
	if got := post(logSrv.URL, "warn", `"io.modelcontextprotocol/clientCapabilities":{}`); strings.Contains(got, "notifications/message") {
		t.Fatalf("a log message without a log level: %s", got)
	}
	if got := post(logSrv.URL, "warn", `"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"info"`); !strings.Contains(got, "notifications/message") {
		t.Fatalf("no log message with the log level info: %s", got)
	}
}
