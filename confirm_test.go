package carmy_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/carmy-dev/carmy"
)

type CancelOrder struct {
	OrderID uint64 `json:"order_id"`
	Reason  string `json:"reason,omitempty"`
}

// confirmRegistry serves cancel_order, which needs confirmation, and
// counts its executions.
func confirmRegistry(t *testing.T) (*carmy.Registry, *atomic.Int32) {
	t.Helper()
	var runs atomic.Int32
	cancel := carmy.Tool(func(in CancelOrder) error { runs.Add(1); return nil }, carmy.Destructive,
		carmy.Name("cancel_order"), carmy.RequireConfirmation(), carmy.Register(false))
	other := carmy.Tool(func() error { return nil }, carmy.Read, carmy.Name("get_order"), carmy.Register(false))
	reg := build(t, carmy.New().Tool(cancel, other))
	return reg, &runs
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestConfirmation(t *testing.T) {
	t.Parallel()
	// The canonical form of {"order_id": 7} in any notation.
	digest := sha(`{"order_id":7}`)
	tests := []struct {
		name   string
		input  string
		perms  []string
		allow  bool
		digest string // expected in Details when refused
	}{
		{"no permission", `{"order_id":7}`, nil, false, digest},
		{"another tool's grant", `{"order_id":7}`, []string{"confirm:get_order"}, false, digest},
		{"case variant", `{"order_id":7}`, []string{"Confirm:cancel_order", "confirm:CANCEL_ORDER"}, false, digest},
		{"prefix only", `{"order_id":7}`, []string{"confirm:cancel_orde", "confirm:"}, false, digest},
		{"wrong digest", `{"order_id":7}`, []string{"confirm:cancel_order:" + sha("x")}, false, digest},
		{"digest of another input", `{"order_id":8}`, []string{"confirm:cancel_order:" + digest}, false, sha(`{"order_id":8}`)},
		{"uppercase digest", `{"order_id":7}`, []string{"confirm:cancel_order:" + upper(digest)}, false, digest},
		{"tool grant", `{"order_id":7}`, []string{"confirm:cancel_order"}, true, ""},
		{"input-bound grant", `{"order_id":7}`, []string{"confirm:cancel_order:" + digest}, true, ""},
		{"input-bound grant, other notation", `{ "order_id" : 7.0 }`, []string{"confirm:cancel_order:" + digest}, true, ""},
		{"input-bound grant, reordered keys", `{"reason":"dup","order_id":7}`, []string{"confirm:cancel_order:" + sha(`{"order_id":7,"reason":"dup"}`)}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg, runs := confirmRegistry(t)
			_, err := reg.Execute(context.Background(), carmy.Call{Tool: "cancel_order", Input: []byte(tt.input), Permissions: tt.perms})
			if tt.allow {
				if err != nil || runs.Load() != 1 {
					t.Fatalf("err = %v, runs = %d; want one execution", err, runs.Load())
				}
				return
			}
			var e *carmy.Error
			if !errors.As(err, &e) || e.Code != carmy.CodeConfirmationRequired {
				t.Fatalf("err = %v; want confirmation_required", err)
			}
			if e.Details["digest"] != tt.digest {
				t.Errorf("digest = %v; want %s", e.Details["digest"], tt.digest)
			}
			if e.Details["permission"] != "confirm:cancel_order:"+tt.digest {
				t.Errorf("permission = %v", e.Details["permission"])
			}
			if runs.Load() != 0 {
				t.Fatalf("the tool ran %d times without confirmation", runs.Load())
			}
		})
	}
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'f' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

func TestConfirmationComesAfterValidation(t *testing.T) {
	t.Parallel()
	reg, runs := confirmRegistry(t)
	_, err := reg.Execute(context.Background(), carmy.Call{Tool: "cancel_order", Input: []byte(`{"order_id":"seven"}`)})
	if carmy.CodeOf(err) != carmy.CodeInvalidInput {
		t.Fatalf("err = %v; want invalid_input before any confirmation", err)
	}
	if runs.Load() != 0 {
		t.Fatal("the tool ran")
	}
}

func TestConfirmationDigestKeepsBigIntegersExact(t *testing.T) {
	t.Parallel()
	var got uint64
	tool := carmy.Tool(func(in struct {
		N uint64 `json:"n"`
	}) error {
		got = in.N
		return nil
	}, carmy.Destructive, carmy.Name("big"), carmy.RequireConfirmation(), carmy.Register(false))
	reg, err := carmy.New().Tool(tool).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	// 2^64-1 and 2^64-2 are the same float64; their digests must differ.
	grant := "confirm:big:" + sha(`{"n":18446744073709551615}`)
	_, err = reg.Execute(context.Background(), carmy.Call{Tool: "big", Input: []byte(`{"n":18446744073709551614}`), Permissions: []string{grant}})
	if carmy.CodeOf(err) != carmy.CodeConfirmationRequired {
		t.Fatalf("err = %v; a grant for another big integer was accepted", err)
	}
	if _, err := reg.Execute(context.Background(), carmy.Call{Tool: "big", Input: []byte(`{"n":18446744073709551615}`), Permissions: []string{grant}}); err != nil || got != 1<<64-1 {
		t.Fatalf("err = %v, got %d", err, got)
	}
}
