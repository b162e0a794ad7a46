package adapt_test

import (
	"context"
	"testing"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/adapt"
	"github.com/carmy-dev/carmy/internal/adapt/adapttest"
)

// BenchmarkRun is a model's call through what every adapter does around
// Execute (the call made from the caller's options, the outcome as the
// model reads it); BenchmarkExecute is the same call to Execute alone.
func BenchmarkRun(b *testing.B) {
	f := adapttest.New(b)
	ctx, in := context.Background(), []byte(`{"text":"milk"}`)
	for b.Loop() {
		if o := adapt.Run(ctx, f.Reg, adapttest.Caller(), "add_note", in, ""); o.Err != nil || len(o.Text()) == 0 {
			b.Fatal(o.Err)
		}
	}
}

func BenchmarkExecute(b *testing.B) {
	f := adapttest.New(b)
	ctx, in := context.Background(), []byte(`{"text":"milk"}`)
	for b.Loop() {
		if _, err := f.Reg.Execute(ctx, carmy.Call{Tool: "add_note", Input: in, Principal: adapttest.Principal}); err != nil {
			b.Fatal(err)
		}
	}
}
