package carmy_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/carmy-dev/carmy"
)

type AddNote struct {
	// Text of the note.
	Text      string `json:"text"`
	RequestID string `json:"request_id,omitempty" carmy:"request_id"`
}

func TestRequestIDFromInput(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	add := carmy.Tool(func(c carmy.Context, in AddNote) (string, error) { runs.Add(1); return c.RequestID, nil },
		carmy.Write, carmy.Name("add_note"), carmy.Register(false))
	reg := build(t, carmy.New().Tool(add))
	ctx := context.Background()

	meta, _ := reg.Lookup("add_note")
	var schema struct {
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(meta.InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	if d := schema.Properties["request_id"].Description; !strings.Contains(d, "Reuse the same value when you retry this call") {
		t.Fatalf("request_id's description = %q; want it to tell the model to reuse it", d)
	}

	call := func(input string, opts ...carmy.CallOption) (string, bool, error) {
		c := carmy.Call{Tool: "add_note", Input: []byte(input)}
		for _, o := range opts {
			o(&c)
		}
		res, err := reg.Execute(ctx, c)
		var got string
		_ = json.Unmarshal(res.Output, &got)
		return got, res.Replayed, err
	}
	if got, replayed, err := call(`{"text":"a","request_id":"r-1"}`); err != nil || got != "r-1" || replayed {
		t.Fatalf("first call = %q, %v, %v; want it to run with request id r-1", got, replayed, err)
	}
	if _, replayed, err := call(`{"text":"a","request_id":"r-1"}`); err != nil || !replayed || runs.Load() != 1 {
		t.Fatalf("the model's retry = replayed %v, %v, runs %d; want the replay", replayed, err, runs.Load())
	}
	if _, _, err := call(`{"text":"b","request_id":"r-1"}`); carmy.CodeOf(err) != carmy.CodeConflict {
		t.Fatalf("another input with the same id = %v; want conflict", err)
	}
	// The transport's request id wins.
	if got, _, err := call(`{"text":"a","request_id":"r-1"}`, carmy.WithRequestID("t-1")); err != nil || got != "t-1" {
		t.Fatalf("with a transport request id = %q, %v; want t-1", got, err)
	}
	// Without one, each call runs.
	before := runs.Load()
	call(`{"text":"a"}`)
	call(`{"text":"a"}`)
	if runs.Load() != before+2 {
		t.Fatal("calls without a request id were deduplicated")
	}
	for _, bad := range []string{`"has space"`, `"` + strings.Repeat("x", 256) + `"`, `"\u00e9"`} {
		_, _, err := call(`{"text":"a","request_id":` + bad + `}`)
		var e *carmy.Error
		if !errors.As(err, &e) || e.Code != carmy.CodeInvalidInput || len(e.Fields) != 1 || e.Fields[0].Path != "request_id" {
			t.Fatalf("request_id %s = %v; want invalid_input at request_id", bad, err)
		}
	}
}

func TestRequestIDTagChecks(t *testing.T) {
	t.Parallel()
	type inner struct {
		ID string `json:"id" carmy:"request_id"`
	}
	tests := []struct {
		name string
		fn   any
		want string
	}{
		{"not a string", func(struct {
			ID int `json:"id" carmy:"request_id"`
		}) error {
			return nil
		}, "is not a string"},
		{"two fields", func(struct {
			A string `json:"a" carmy:"request_id"`
			B string `json:"b" carmy:"request_id"`
		}) error {
			return nil
		}, "are both tagged"},
		{"nested", func(struct {
			In []inner `json:"in"`
		}) error {
			return nil
		}, "not at the input's top level"},
		{"unknown tag", func(struct {
			A string `json:"a" carmy:"idempotency"`
		}) error {
			return nil
		}, "unknown carmy tag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := carmy.New().Tool(carmy.Tool(tt.fn, carmy.Write, carmy.Name("x"), carmy.Register(false))).Build()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Build = %v; want %q", err, tt.want)
			}
		})
	}
}
