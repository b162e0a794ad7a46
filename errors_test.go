package carmy_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/carmy-dev/carmy"
)

func TestCodeOf(t *testing.T) {
	t.Parallel()
	notFound := carmy.Errorf(carmy.CodeNotFound, "order 7 not found")
	tests := []struct {
		name string
		err  error
		want carmy.Code
	}{
		{"nil", nil, ""},
		{"plain error", errors.New("boom"), carmy.CodeInternal},
		{"io.EOF", io.EOF, carmy.CodeInternal},
		{"carmy error", notFound, carmy.CodeNotFound},
		{"wrapped carmy error", fmt.Errorf("loading: %w", notFound), carmy.CodeNotFound},
		{"joined", errors.Join(errors.New("other"), carmy.Errorf(carmy.CodeConflict, "taken")), carmy.CodeConflict},
		{"wrapped plain error", fmt.Errorf("x: %w", errors.New("y")), carmy.CodeInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := carmy.CodeOf(tt.err); got != tt.want {
				t.Errorf("CodeOf(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

func TestCodeStrings(t *testing.T) {
	t.Parallel()
	// Codes are part of the wire format.
	tests := []struct {
		code carmy.Code
		want string
	}{
		{carmy.CodeInvalidInput, "invalid_input"},
		{carmy.CodeUnknownTool, "unknown_tool"},
		{carmy.CodeUnauthenticated, "unauthenticated"},
		{carmy.CodePermissionDenied, "permission_denied"},
		{carmy.CodeConfirmationRequired, "confirmation_required"},
		{carmy.CodeNotFound, "not_found"},
		{carmy.CodeConflict, "conflict"},
		{carmy.CodeCancelled, "cancelled"},
		{carmy.CodeTimeout, "timeout"},
		{carmy.CodeUnavailable, "unavailable"},
		{carmy.CodeInternal, "internal"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if string(tt.code) != tt.want {
				t.Errorf("code = %q, want %q", tt.code, tt.want)
			}
		})
	}
}

func TestErrorfRetryableDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code      carmy.Code
		retryable bool
	}{
		{carmy.CodeInvalidInput, false},
		{carmy.CodeUnknownTool, false},
		{carmy.CodeUnauthenticated, false},
		{carmy.CodePermissionDenied, false},
		{carmy.CodeConfirmationRequired, false},
		{carmy.CodeNotFound, false},
		{carmy.CodeConflict, false},
		{carmy.CodeCancelled, true},
		{carmy.CodeTimeout, true},
		{carmy.CodeUnavailable, true},
		{carmy.CodeInternal, true},
	}
	for _, tt := range tests {
		t.Run(string(tt.code), func(t *testing.T) {
			e := carmy.Errorf(tt.code, "order %d: %s", 7, "x")
			if e.Code != tt.code {
				t.Errorf("Code = %q, want %q", e.Code, tt.code)
			}
			if e.Retryable != tt.retryable {
				t.Errorf("Retryable = %v, want %v", e.Retryable, tt.retryable)
			}
			if e.Message != "order 7: x" {
				t.Errorf("Message = %q, want %q", e.Message, "order 7: x")
			}
			if e.Err != nil {
				t.Errorf("Err = %v, want nil without %%w", e.Err)
			}
		})
	}
}

func TestErrorfWrapKeepsCauseInErr(t *testing.T) {
	t.Parallel()
	cause := errors.New("dial tcp 10.0.0.7:5432: connection refused")
	tests := []struct {
		name   string
		format string
		args   []any
		want   string
	}{
		{"trailing", "cannot load order %d: %w", []any{7, cause}, "cannot load order 7"},
		{"only", "%w", []any{cause}, ""},
		{"leading", "%w: while loading order %d", []any{cause, 7}, "while loading order 7"},
		{"middle", "order %d: %w; try again later", []any{7, cause}, "order 7; try again later"},
		{"explicit index", "%[2]w while loading order %[1]d", []any{7, cause}, "while loading order 7"},
		{"literal percent", "100%% of order %d failed: %w", []any{7, cause}, "100% of order 7 failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := carmy.Errorf(carmy.CodeUnavailable, tt.format, tt.args...)
			if e.Err != cause {
				t.Errorf("Err = %v, want the wrapped cause", e.Err)
			}
			if !errors.Is(e, cause) {
				t.Errorf("errors.Is(e, cause) = false; the cause must stay reachable")
			}
			if strings.Contains(e.Message, "connection refused") || strings.Contains(e.Message, "10.0.0.7") {
				t.Errorf("Message %q carries the cause; the cause is logged, never sent", e.Message)
			}
			if e.Message != tt.want {
				t.Errorf("Message = %q, want %q", e.Message, tt.want)
			}
			if !e.Retryable {
				t.Errorf("Retryable = false, want the unavailable default (true)")
			}
		})
	}
	t.Run("v shows, w hides", func(t *testing.T) {
		shown := errors.New("sku A-1 is discontinued")
		e := carmy.Errorf(carmy.CodeConflict, "%v (%w)", shown, cause)
		if e.Message != "sku A-1 is discontinued" {
			t.Errorf("Message = %q, want the %%v argument and not the %%w cause", e.Message)
		}
		if e.Err != cause {
			t.Errorf("Err = %v, want the %%w cause", e.Err)
		}
	})
}

func TestErrorString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  *carmy.Error
		want []string
	}{
		{"code and message", carmy.Errorf(carmy.CodeNotFound, "order 7 not found"), []string{"not_found", "order 7 not found"}},
		{"fields", &carmy.Error{Code: carmy.CodeInvalidInput, Message: "bad", Fields: []carmy.FieldError{{Path: "items[2].sku", Message: "is required"}, {Path: "", Message: "whole"}}},
			[]string{"invalid_input", "bad", "items[2].sku: is required", "whole"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.err.Error()
			for _, w := range tt.want {
				if !strings.Contains(s, w) {
					t.Errorf("Error() = %q, want it to contain %q", s, w)
				}
			}
		})
	}
	t.Run("cause not in Error()", func(t *testing.T) {
		e := &carmy.Error{Code: carmy.CodeInternal, Message: "internal error", Err: errors.New("secret-cause")}
		if strings.Contains(e.Error(), "secret-cause") {
			t.Errorf("Error() = %q shows the cause", e.Error())
		}
		if !errors.Is(e, e.Err) {
			t.Errorf("Unwrap does not reach Err")
		}
	})
}

func TestErrorAs(t *testing.T) {
	t.Parallel()
	orig := carmy.Errorf(carmy.CodePermissionDenied, "no")
	wrapped := fmt.Errorf("ctx: %w", orig)
	var e *carmy.Error
	if !errors.As(wrapped, &e) || e != orig {
		t.Fatalf("errors.As did not reach the *carmy.Error")
	}
}

func TestBuildErrorString(t *testing.T) {
	t.Parallel()
	cause := errors.New("has no effect")
	tests := []struct {
		name string
		err  *carmy.BuildError
		want []string
	}{
		{"tool and site", &carmy.BuildError{Tool: "create_order", Site: "orders.go:12", Err: cause}, []string{`"create_order"`, "orders.go:12", "has no effect"}},
		{"no tool", &carmy.BuildError{Site: "orders.go:12", Err: cause}, []string{"orders.go:12", "has no effect"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.err.Error()
			for _, w := range tt.want {
				if !strings.Contains(s, w) {
					t.Errorf("Error() = %q, want it to contain %q", s, w)
				}
			}
			if !errors.Is(tt.err, cause) {
				t.Errorf("BuildError does not unwrap to its problem")
			}
		})
	}
}
