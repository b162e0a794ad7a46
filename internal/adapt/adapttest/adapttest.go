// Package adapttest is the registry the adapters' end-to-end tests give
// their frameworks: a tool that writes, a destructive one that needs a
// person's confirmation and one that runs only as a task, each counting
// its runs, and one the tests' caller may not call.
package adapttest

import (
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/carmy-dev/carmy"
)

// Principal is the caller the tests act for.
const Principal = "alice"

// Caller is the identity of the tests' calls.
func Caller() []carmy.CallOption { return []carmy.CallOption{carmy.WithPrincipal(Principal)} }

// AddNote is the input of add_note.
type AddNote struct {
	Text string `json:"text" validate:"required,max=40" jsonschema:"description=The note"`
	// Tags and Due give the schema arrays, pattern rules and a nullable
	// field, which every framework's form of it must keep.
	Tags []string `json:"tags,omitempty" validate:"max=3,dive,min=1,max=20"`
	Due  *DueDate `json:"due"`
}

// DueDate is an optional part of a note, a nested object in the schema.
type DueDate struct {
	Day string `json:"day" validate:"datetime=2006-01-02"`
}

// Note is a saved note.
type Note struct {
	Text  string `json:"text"`
	Owner string `json:"owner"`
}

// DeleteNote is the input of delete_note.
type DeleteNote struct {
	ID int `json:"id" validate:"min=1"`
}

// Fixture is a registry and the runs of its tools.
type Fixture struct {
	Reg     *carmy.Registry
	Added   atomic.Int32 // runs of add_note
	Deleted atomic.Int32 // runs of delete_note
	// Exported counts the runs of export_notes, which runs only as a
	// task.
	Exported atomic.Int32
}

// Export is the input of export_notes.
type Export struct {
	Format string `json:"format" validate:"oneof=csv json"`
}

// New builds the registry; it is closed when the test ends.
func New(t testing.TB) *Fixture {
	t.Helper()
	f := &Fixture{}
	add := carmy.Tool(func(c carmy.Context, in AddNote) (Note, error) {
		f.Added.Add(1)
		return Note{Text: in.Text, Owner: c.Principal}, nil
	}, carmy.Write, carmy.Name("add_note"), carmy.Description("Save a note"), carmy.Register(false))
	del := carmy.Tool(func(in DeleteNote) (string, error) {
		f.Deleted.Add(1)
		return "deleted", nil
	}, carmy.Destructive, carmy.Name("delete_note"), carmy.Description("Delete a note"), carmy.RequireConfirmation(), carmy.Register(false))
	// The caller lacks the permission purge_notes requires: its model is
	// never offered it.
	purge := carmy.Tool(func() error { return nil }, carmy.Destructive, carmy.Name("purge_notes"),
		carmy.Requires("notes:admin"), carmy.Register(false))
	export := carmy.Tool(func(in Export) (string, error) {
		f.Exported.Add(1)
		return "exported as " + in.Format, nil
	}, carmy.Read, carmy.Name("export_notes"), carmy.Description("Export the notes"), carmy.Tasks(carmy.TaskRequired), carmy.Register(false))
	reg, err := carmy.New().Tool(add, del, purge, export).Logger(slog.New(slog.DiscardHandler)).Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	f.Reg = reg
	return f
}
