package carmy_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/carmy-dev/carmy"
)

// ctSeen is what a tool found through ContextFrom.
type ctSeen struct {
	Found       bool              `json:"found"`
	ExecutionID string            `json:"execution_id"`
	RequestID   string            `json:"request_id"`
	Principal   string            `json:"principal"`
	Session     string            `json:"session"`
	Permissions []string          `json:"permissions"`
	CanConfirm  bool              `json:"can_confirm"`
	Metadata    map[string]string `json:"metadata"`
	SameAsParam bool              `json:"same_as_param"`
}

func ctFrom(ctx context.Context) ctSeen {
	c, ok := carmy.ContextFrom(ctx)
	return ctSeen{Found: ok, ExecutionID: c.ExecutionID, RequestID: c.RequestID, Principal: c.Principal, Session: c.Session,
		Permissions: c.Permissions.List(), CanConfirm: c.Permissions.Has("confirm:orders"), Metadata: c.Metadata}
}

// ctDeep stands for code deep in a tool's call tree that receives only a
// context.Context.
func ctDeep(ctx context.Context) ctSeen { return ctFrom(ctx) }

type ctKey struct{}

func TestContextFromInsideTools(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		fn   any
	}{
		{"carmy.Context", func(ctx carmy.Context) (ctSeen, error) {
			s := ctFrom(ctx)
			s.SameAsParam = s.ExecutionID == ctx.ExecutionID && s.Principal == ctx.Principal && ctx.Permissions.Has("confirm:orders")
			return s, nil
		}},
		{"context.Context", func(ctx context.Context) (ctSeen, error) {
			s := ctDeep(ctx)
			s.SameAsParam = true
			return s, nil
		}},
		{"derived context", func(ctx carmy.Context) (ctSeen, error) {
			inner, cancel := context.WithTimeout(context.WithValue(ctx, ctKey{}, "x"), time.Minute)
			defer cancel()
			s := ctDeep(inner)
			s.SameAsParam = s.ExecutionID == ctx.ExecutionID
			return s, nil
		}},
		{"context after the input", func(in struct{}, ctx context.Context) (ctSeen, error) {
			s := ctDeep(ctx)
			s.SameAsParam = true
			return s, nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rtRegistry(t, carmy.New().Tool(carmy.Tool(tt.fn, carmy.Read, carmy.Name("ctx"), carmy.Register(false))))
			call := carmy.Call{
				Tool: "ctx", RequestID: "req-7", Session: "sess-1", Principal: "alice",
				Permissions: []string{"read:orders", "confirm:orders", "read:orders"},
				Metadata:    map[string]string{"trace": "abc"},
			}
			res, err := r.Execute(context.Background(), call)
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			var s ctSeen
			if err := json.Unmarshal(res.Output, &s); err != nil {
				t.Fatal(err)
			}
			if !s.Found {
				t.Fatalf("ContextFrom found no Context inside the tool")
			}
			if s.ExecutionID != res.ExecutionID || s.ExecutionID == "" {
				t.Errorf("ExecutionID = %q, want the result's %q", s.ExecutionID, res.ExecutionID)
			}
			if s.RequestID != "req-7" || s.Principal != "alice" || s.Session != "sess-1" {
				t.Errorf("request/principal/session = %q/%q/%q", s.RequestID, s.Principal, s.Session)
			}
			if want := []string{"confirm:orders", "read:orders"}; !slices.Equal(s.Permissions, want) || !s.CanConfirm {
				t.Errorf("Permissions = %v (has confirm: %v), want %v", s.Permissions, s.CanConfirm, want)
			}
			if len(s.Metadata) != 1 || s.Metadata["trace"] != "abc" {
				t.Errorf("Metadata = %v", s.Metadata)
			}
			if !s.SameAsParam {
				t.Errorf("ContextFrom disagrees with the Context parameter")
			}
		})
	}
}

func TestContextFromOutsideTools(t *testing.T) {
	t.Parallel()
	var nilCtx context.Context
	tests := []struct {
		name string
		ctx  context.Context
	}{
		{"background", context.Background()},
		{"todo", context.TODO()},
		{"nil", nilCtx},
		{"value of another key", context.WithValue(context.Background(), ctKey{}, "x")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := carmy.ContextFrom(tt.ctx)
			if ok || c.ExecutionID != "" {
				t.Errorf("ContextFrom = %+v, %v; want nothing outside a tool", c, ok)
			}
		})
	}
}

func TestContextFromAfterTheCall(t *testing.T) {
	t.Parallel()
	// A context kept by the tool still answers ContextFrom after the call,
	// and is done.
	kept := make(chan context.Context, 1)
	r := rtRegistry(t, carmy.New().Tool(carmy.Tool(func(ctx context.Context) error {
		kept <- ctx
		return nil
	}, carmy.Write, carmy.Name("keep"), carmy.Register(false))))
	res, err := r.Execute(context.Background(), carmy.Call{Tool: "keep", Principal: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := <-kept
	c, ok := carmy.ContextFrom(ctx)
	if !ok || c.ExecutionID != res.ExecutionID || c.Principal != "bob" {
		t.Errorf("ContextFrom = %+v, %v", c, ok)
	}
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
		t.Errorf("the tool's context is not done after the call returned")
	}
}

func TestContextDoesNotLeakBetweenCalls(t *testing.T) {
	t.Parallel()
	r := rtRegistry(t, carmy.New().Tool(carmy.Tool(func(ctx carmy.Context) (ctSeen, error) { return ctFrom(ctx), nil },
		carmy.Read, carmy.Name("who"), carmy.Register(false))))
	a, err := carmy.Invoke[ctSeen](context.Background(), r, "who", nil, carmy.WithPrincipal("alice"), carmy.WithPermissions("x"), carmy.WithMetadata("k", "v"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := carmy.Invoke[ctSeen](context.Background(), r, "who", nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Principal != "alice" || b.Principal != "" || len(b.Permissions) != 0 || len(b.Metadata) != 0 || a.ExecutionID == b.ExecutionID {
		t.Errorf("first call %+v, second call %+v: the second must see nothing of the first", a, b)
	}
}

func TestContextPermissionsAreACopy(t *testing.T) {
	t.Parallel()
	perms := []string{"read:orders"}
	got := make(chan carmy.Permissions, 1)
	r := rtRegistry(t, carmy.New().Tool(carmy.Tool(func(ctx carmy.Context) error {
		got <- ctx.Permissions
		return nil
	}, carmy.Read, carmy.Name("perms"), carmy.Register(false))))
	if _, err := r.Execute(context.Background(), carmy.Call{Tool: "perms", Permissions: perms}); err != nil {
		t.Fatal(err)
	}
	perms[0] = "admin" // the caller reuses its slice
	p := <-got
	if p.Has("admin") || !p.Has("read:orders") {
		t.Errorf("Permissions = %v; changing the Call's slice changed the grants a tool kept", p.List())
	}
}

func TestPermissions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   []string
		list []string
		has  map[string]bool
	}{
		{"empty", nil, nil, map[string]bool{"": false, "x": false}},
		{"sorted", []string{"b", "a", "c"}, []string{"a", "b", "c"}, map[string]bool{"a": true, "c": true, "d": false}},
		{"duplicates count once", []string{"x", "x", "y"}, []string{"x", "y"}, map[string]bool{"x": true}},
		{"exact and case-sensitive", []string{"confirm:cancel_order"}, []string{"confirm:cancel_order"},
			map[string]bool{"confirm:cancel_order": true, "Confirm:cancel_order": false, "confirm:cancel": false, "confirm:cancel_order:abc": false, " confirm:cancel_order": false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := carmy.NewPermissions(tt.in...)
			if l := p.List(); !slices.Equal(l, tt.list) && !(len(l) == 0 && len(tt.list) == 0) {
				t.Errorf("List() = %v, want %v", l, tt.list)
			}
			for perm, want := range tt.has {
				if got := p.Has(perm); got != want {
					t.Errorf("Has(%q) = %v, want %v", perm, got, want)
				}
			}
		})
	}
	t.Run("immutable", func(t *testing.T) {
		in := []string{"b", "a"}
		p := carmy.NewPermissions(in...)
		in[0] = "z"
		l := p.List()
		l[0] = "changed"
		if got := p.List(); !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("List() = %v after changing the input and a returned list", got)
		}
		if in[1] != "a" {
			t.Errorf("NewPermissions reordered its argument: %v", in)
		}
	})
	t.Run("zero value", func(t *testing.T) {
		var p carmy.Permissions
		if p.Has("") || len(p.List()) != 0 {
			t.Errorf("the zero Permissions is not empty")
		}
	})
}
