package llm_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/llm"
)

// TestDispatchPermissionFirst: a caller that may not call a tool is
// refused for want of permission whatever arguments it sends, entries that
// cannot become a map included: the refusal names no field of the tool's
// input, and it reaches the audit, as every refusal does. A caller that
// may call the tool gets the entries' problems, audited too.
func TestDispatchPermissionFirst(t *testing.T) {
	var (
		mu      sync.Mutex
		records []carmy.AuditRecord
	)
	reg, err := carmy.New().Tool(carmy.Tool(func(_ context.Context, in nestedMaps) (nestedMaps, error) { return in, nil },
		carmy.Read, carmy.Name("nested"), carmy.Register(false), carmy.Requires("secrets:read"))).
		Audit(carmy.AuditorFunc(func(_ context.Context, rec carmy.AuditRecord) error {
			mu.Lock()
			defer mu.Unlock()
			records = append(records, rec)
			return nil
		})).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	d := llm.NewDispatcher(reg)
	bad := `{"groups":[{"tags":[{"key":"a","value":"1"},{"key":"a","value":"2"}]}],"by name":[{"key":1,"value":{}}]}`
	for name, dispatch := range map[string]func(opts ...carmy.CallOption) (carmy.Result, error){
		"Dispatch": func(opts ...carmy.CallOption) (carmy.Result, error) {
			return llm.Dispatch(context.Background(), reg, "nested", bad, opts...)
		},
		"Dispatcher": func(opts ...carmy.CallOption) (carmy.Result, error) {
			return d.Dispatch(context.Background(), "nested", bad, opts...)
		},
	} {
		t.Run(name, func(t *testing.T) {
			mu.Lock()
			records = nil
			mu.Unlock()
			_, err := dispatch(carmy.WithPrincipal("mallory"))
			var e *carmy.Error
			if !errors.As(err, &e) || e.Code != carmy.CodePermissionDenied {
				t.Fatalf("a caller without the permission: %v; want permission_denied", err)
			}
			if len(e.Fields) > 0 || strings.Contains(e.Message, "tags") || strings.Contains(e.Message, "groups") {
				t.Fatalf("the refusal speaks of the hidden tool's input: %q, fields %v", e.Message, e.Fields)
			}
			_, err = dispatch(carmy.WithPrincipal("alice"), carmy.WithPermissions("secrets:read"))
			if !errors.As(err, &e) || e.Code != carmy.CodeInvalidInput || len(e.Fields) != 2 {
				t.Fatalf("a caller with the permission: %v; want the entries' two problems", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(records) != 2 ||
				records[0].Decision != carmy.AuditRefused || records[0].Principal != "mallory" || records[0].Code != carmy.CodePermissionDenied ||
				records[1].Decision != carmy.AuditRefused || records[1].Principal != "alice" || records[1].Code != carmy.CodeInvalidInput {
				t.Fatalf("audit records %+v; want mallory's permission_denied and alice's invalid_input", records)
			}
		})
	}
}
