// Package adapttest is the registry the adapters' end-to-end tests give
// their frameworks: a tool that writes, a destructive one that needs a
// person's confirmation and one that runs only as a task, each counting
// its runs, and one the tests' caller may not call.
package adapttest

import (
	"encoding/json"
	"log/slog"
	"slices"
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
	return build(t, false)
}

// Searching builds the registry with search_tools, and delete_note
// deferred, as a host with many tools would; it is closed when the test
// ends. A search for "note" by the tests' caller finds add_note and
// delete_note, never purge_notes.
func Searching(t testing.TB) *Fixture {
	t.Helper()
	return build(t, true)
}

func build(t testing.TB, search bool) *Fixture {
	t.Helper()
	f := &Fixture{}
	b := carmy.New()
	var delOpts []carmy.Option
	if search {
		b.ToolSearch()
		delOpts = append(delOpts, carmy.Deferred())
	}
	add := carmy.Tool(func(c carmy.Context, in AddNote) (Note, error) {
		f.Added.Add(1)
		return Note{Text: in.Text, Owner: c.Principal}, nil
	}, carmy.Write, carmy.Name("add_note"), carmy.Description("Save a note"), carmy.Register(false))
	del := carmy.Tool(func(in DeleteNote) (string, error) {
		f.Deleted.Add(1)
		return "deleted", nil
	}, carmy.Destructive, append(delOpts, carmy.Name("delete_note"), carmy.Description("Delete a note"), carmy.RequireConfirmation(), carmy.Register(false))...)
	// The caller lacks the permission purge_notes requires: its model is
	// never offered it.
	purge := carmy.Tool(func() error { return nil }, carmy.Destructive, carmy.Name("purge_notes"),
		carmy.Requires("notes:admin"), carmy.Register(false))
	export := carmy.Tool(func(in Export) (string, error) {
		f.Exported.Add(1)
		return "exported as " + in.Format, nil
	}, carmy.Read, carmy.Name("export_notes"), carmy.Description("Export the notes"), carmy.Tasks(carmy.TaskRequired), carmy.Register(false))
	reg, err := b.Tool(add, del, purge, export).Logger(slog.New(slog.DiscardHandler)).Build()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	f.Reg = reg
	return f
}

// CheckSearch checks a framework's run of search_tools for the tests'
// caller over a [Searching] registry: the model was offered the three
// tools the caller may call (never Anthropic's tool search, which the
// export adds for the deferred delete_note), and the output found
// add_note and delete_note, never purge_notes.
func CheckSearch(t testing.TB, offered []string, output string) {
	t.Helper()
	offered = slices.Sorted(slices.Values(offered))
	if !slices.Equal(offered, []string{"add_note", "delete_note", "export_notes", "search_tools"}) {
		t.Errorf("offered %v", offered)
	}
	var out struct{ Tools []struct{ Name string } }
	if err := json.Unmarshal([]byte(output), &out); err != nil {
		t.Fatalf("search_tools answered %s: %v", output, err)
	}
	var found []string
	for _, h := range out.Tools {
		found = append(found, h.Name)
	}
	slices.Sort(found)
	if !slices.Equal(found, []string{"add_note", "delete_note", "export_notes"}) {
		t.Errorf("search_tools found %v; want add_note, delete_note and export_notes (a task-only tool runs as a task), not purge_notes", found)
	}
}
