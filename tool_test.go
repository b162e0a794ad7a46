package carmy_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

// The functions below exist for their names. The spelling examples are
// methods, so that their names cannot collide with other files of this
// package.

type tdNamer struct{}

func (tdNamer) createOrder() error   { return nil }
func (tdNamer) getHTTPStatus() error { return nil }
func (tdNamer) listV2Items() error   { return nil }

type tdSvc struct{}

func (*tdSvc) CancelOrder(ctx context.Context) error { return nil }

// tdStatus is both the receiver and, in a method expression, the input.
type tdStatus struct {
	Verbose bool `json:"verbose,omitempty"`
}

func (tdStatus) GetStatus(ctx context.Context) (string, error) { return "ok", nil }

func tdFetchHTTPStatus() error                           { return nil }
func tdListV2Items() error                               { return nil }
func tdUserID() error                                    { return nil }
func tdHTTPServer() error                                { return nil }
func tdGenericEcho[T any](in T) (T, error)               { return in, nil }
func tdUnicodeNameÉté() error                            { return nil }
func tdDescribed(context.Context) error                  { return nil }
func tdTimed(ctx context.Context) (time.Duration, error) { return 0, nil }

type tdBox[T any] struct{}

func (*tdBox[T]) ListItems() error { return nil }

func tdCommented() error      { return nil }
func tdCommentedTwice() error { return nil }

// tdPkgClosure is a closure declared at package level.
var tdPkgClosure = func() error { return nil }

type tdEchoIn struct {
	Text string `json:"text"`
}

// tdOnly builds a registry of one tool and returns its metadata.
func tdOnly(t *testing.T, def *carmy.ToolDef) carmy.ToolMetadata {
	t.Helper()
	r, err := carmy.New().Tool(def).Build()
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	tools := r.Tools()
	if len(tools) != 1 {
		t.Fatalf("Tools() has %d tools, want 1", len(tools))
	}
	return tools[0]
}

func TestToolNameDerivation(t *testing.T) {
	t.Parallel()
	var n tdNamer
	svc := &tdSvc{}
	tests := []struct {
		name string
		fn   any
		want string
	}{
		{"function createOrder", n.createOrder, "create_order"},
		{"acronym run getHTTPStatus", n.getHTTPStatus, "get_http_status"},
		{"digits listV2Items", n.listV2Items, "list_v2_items"},
		{"method value (*Svc).CancelOrder", svc.CancelOrder, "cancel_order"},
		{"method expression tdStatus.GetStatus", tdStatus.GetStatus, "get_status"},
		{"package function with acronym", tdFetchHTTPStatus, "td_fetch_http_status"},
		{"package function with digits", tdListV2Items, "td_list_v2_items"},
		{"trailing acronym", tdUserID, "td_user_id"},
		{"acronym before word", tdHTTPServer, "td_http_server"},
		{"generic function", tdGenericEcho[tdEchoIn], "td_generic_echo"},
		{"method value of a generic type", (&tdBox[int]{}).ListItems, "list_items"},
		{"method expression of a generic type", (*tdBox[string]).ListItems, "list_items"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tdOnly(t, carmy.Tool(tt.fn, carmy.Read, carmy.Register(false)))
			if m.Name != tt.want {
				t.Errorf("derived name = %q, want %q", m.Name, tt.want)
			}
		})
	}
}

func TestToolClosuresNeedAName(t *testing.T) {
	t.Parallel()
	var nested func() error
	func() { nested = func() error { return nil } }()
	var inRange func() error
	for range func(yield func() bool) { yield() } {
		inRange = func() error { return nil }
	}
	tests := []struct {
		name string
		fn   any
	}{
		{"closure", func() error { return nil }},
		{"closure in a closure", nested},
		{"closure in a range-over-func loop", inRange},
		{"package-level closure", tdPkgClosure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := carmy.New().Tool(carmy.Tool(tt.fn, carmy.Read, carmy.Register(false))).Build()
			if err == nil || !strings.Contains(err.Error(), "carmy.Name") {
				t.Fatalf("Build error = %v, want one asking for carmy.Name", err)
			}
			r, err := carmy.New().Tool(carmy.Tool(tt.fn, carmy.Read, carmy.Name("named"), carmy.Register(false))).Build()
			if err != nil {
				t.Fatalf("with Name: %v", err)
			}
			r.Close()
		})
	}
}

func TestToolDescriptionFromComments(t *testing.T) {
	t.Parallel()
	// Tool records the function; the description is read at Build, after
	// every init has registered the comments that carmy gen extracted.
	plain := carmy.Tool(tdCommented, carmy.Read, carmy.Register(false))
	explicit := carmy.Tool(tdCommentedTwice, carmy.Read, carmy.Description("From the option"), carmy.Register(false))
	carmy.RegisterComments(map[string]string{
		"github.com/carmy-dev/carmy_test.tdCommented":      "From the comment.",
		"github.com/carmy-dev/carmy_test.tdCommentedTwice": "Loses to the option.",
	})
	tests := []struct {
		name string
		def  *carmy.ToolDef
		want string
	}{
		{"comment", plain, "From the comment."},
		{"option wins", explicit, "From the option"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if m := tdOnly(t, tt.def); m.Description != tt.want {
				t.Errorf("Description = %q, want %q", m.Description, tt.want)
			}
		})
	}
}

func TestToolNameOverride(t *testing.T) {
	t.Parallel()
	var n tdNamer
	tests := []struct {
		name string
		fn   any
		opt  string
	}{
		{"function", n.createOrder, "orders.create"},
		{"closure", func() error { return nil }, "inline-tool"},
		{"max length", tdUserID, strings.Repeat("a", 128)},
		{"every allowed character", tdUserID, "A-z_0.9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tdOnly(t, carmy.Tool(tt.fn, carmy.Read, carmy.Name(tt.opt), carmy.Register(false)))
			if m.Name != tt.opt {
				t.Errorf("name = %q, want %q", m.Name, tt.opt)
			}
		})
	}
}

func TestToolUnicodeDerivedNameIsRejected(t *testing.T) {
	t.Parallel()
	_, err := carmy.New().Tool(carmy.Tool(tdUnicodeNameÉté, carmy.Read, carmy.Register(false))).Build()
	if err == nil || !strings.Contains(err.Error(), "invalid name") {
		t.Fatalf("Build error = %v, want an invalid name (names are ASCII)", err)
	}
}

func TestToolOptionsInMetadata(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		def     *carmy.ToolDef
		builder func(*carmy.Builder) *carmy.Builder
		check   func(t *testing.T, m carmy.ToolMetadata)
	}{
		{
			name: "defaults",
			def:  carmy.Tool(tdDescribed, carmy.Write, carmy.Register(false)),
			check: func(t *testing.T, m carmy.ToolMetadata) {
				if m.Effect != carmy.Write || m.Idempotent || m.ParallelSafe || m.Confirmation != carmy.ConfirmationNone {
					t.Errorf("metadata = %+v, want write with every flag off", m)
				}
				if m.Timeout != carmy.DefaultTimeout {
					t.Errorf("Timeout = %v, want DefaultTimeout %v", m.Timeout, carmy.DefaultTimeout)
				}
				if m.Description != "" {
					t.Errorf("Description = %q, want \"\" without carmy gen", m.Description)
				}
			},
		},
		{
			name: "every option",
			def: carmy.Tool(tdDescribed, carmy.Destructive, carmy.Register(false),
				carmy.Description("Deletes everything"), carmy.Idempotent(), carmy.ParallelSafe(),
				carmy.RequireConfirmation(), carmy.Timeout(3*time.Second)),
			check: func(t *testing.T, m carmy.ToolMetadata) {
				want := carmy.ToolMetadata{Name: "td_described", Description: "Deletes everything", Effect: carmy.Destructive,
					Idempotent: true, ParallelSafe: true, Confirmation: carmy.ConfirmationRequired, Timeout: 3 * time.Second}
				m.InputSchema, m.OutputSchema = nil, nil
				if !tdMetaEqual(m, want) {
					t.Errorf("metadata = %+v, want %+v", m, want)
				}
			},
		},
		{
			name: "same option twice with the same value",
			def: carmy.Tool(tdDescribed, carmy.Read, carmy.Register(false), carmy.Name("twice"), carmy.Name("twice"),
				carmy.Idempotent(), carmy.Idempotent(), carmy.Timeout(time.Second), carmy.Timeout(time.Second)),
			check: func(t *testing.T, m carmy.ToolMetadata) {
				if m.Name != "twice" || !m.Idempotent || m.Timeout != time.Second {
					t.Errorf("metadata = %+v", m)
				}
			},
		},
		{
			name:    "builder default timeout",
			def:     carmy.Tool(tdTimed, carmy.Read, carmy.Register(false)),
			builder: func(b *carmy.Builder) *carmy.Builder { return b.Timeout(7 * time.Second) },
			check: func(t *testing.T, m carmy.ToolMetadata) {
				if m.Timeout != 7*time.Second {
					t.Errorf("Timeout = %v, want the builder's 7s", m.Timeout)
				}
			},
		},
		{
			name:    "tool timeout wins over the builder's",
			def:     carmy.Tool(tdTimed, carmy.Read, carmy.Register(false), carmy.Timeout(2*time.Second)),
			builder: func(b *carmy.Builder) *carmy.Builder { return b.Timeout(7 * time.Second) },
			check: func(t *testing.T, m carmy.ToolMetadata) {
				if m.Timeout != 2*time.Second {
					t.Errorf("Timeout = %v, want the tool's 2s", m.Timeout)
				}
			},
		},
		{
			name: "nil option is ignored",
			def:  carmy.Tool(tdTimed, carmy.Read, nil, carmy.Register(false)),
			check: func(t *testing.T, m carmy.ToolMetadata) {
				if m.Name != "td_timed" {
					t.Errorf("Name = %q", m.Name)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := carmy.New().Tool(tt.def)
			if tt.builder != nil {
				b = tt.builder(b)
			}
			r, err := b.Build()
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			defer r.Close()
			tools := r.Tools()
			if len(tools) != 1 {
				t.Fatalf("%d tools, want 1", len(tools))
			}
			tt.check(t, tools[0])
		})
	}
}

func tdMetaEqual(a, b carmy.ToolMetadata) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func TestToolDefIsSharedByBuilders(t *testing.T) {
	t.Parallel()
	def := carmy.Tool(tdFetchHTTPStatus, carmy.Read, carmy.Register(false))
	for i := range 2 {
		r, err := carmy.New().Tool(def).Build()
		if err != nil {
			t.Fatalf("build %d: %v", i, err)
		}
		if _, ok := r.Lookup("td_fetch_http_status"); !ok {
			t.Errorf("build %d lacks the tool", i)
		}
		r.Close()
	}
}
