package carmy_test

import (
	"bytes"
	"context"
	"flag"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/carmy-dev/carmy"
)

// WalkNote is the input of the tools whose calls TestCallWalk walks.
type WalkNote struct {
	ID int `json:"id"`
}

// walkCalls is how many calls TestCallWalk makes: 0 builds and connects
// alone, for a coverage profile to subtract from that of one call.
var walkCalls = flag.Int("walk.calls", 1, "calls TestCallWalk makes (0 or 1)")

// frame is one frame of a stack: its function and the module's file it
// is in, relative to the module's root ("" outside the module).
type frame struct{ fn, file string }

// walk is what the probes of one call saw: the stacks, outermost frame
// first, in the module's files alone.
type walk struct {
	root   string
	mu     sync.Mutex
	stacks [][]frame
}

func newWalk() *walk {
	_, self, _, _ := runtime.Caller(0)
	return &walk{root: filepath.Dir(self) + string(filepath.Separator)}
}

// rel is file relative to the module's root, "" for a file outside it or
// a test file.
func (w *walk) rel(file string) string {
	r, ok := strings.CutPrefix(file, w.root)
	if !ok || strings.HasSuffix(r, "_test.go") {
		return ""
	}
	return r
}

// add keeps frames, innermost first as stacks list them.
func (w *walk) add(frames []frame) {
	var s []frame
	for _, f := range slices.Backward(frames) {
		if f.file = w.rel(f.file); f.file != "" {
			s = append(s, f)
		}
	}
	w.mu.Lock()
	w.stacks = append(w.stacks, s)
	w.mu.Unlock()
}

// here records the stack of the goroutine that calls it.
func (w *walk) here() {
	pc := make([]uintptr, 256)
	frames := runtime.CallersFrames(pc[:runtime.Callers(2, pc)])
	var fs []frame
	for {
		f, more := frames.Next()
		fs = append(fs, frame{f.Function, f.File})
		if !more {
			break
		}
	}
	w.add(fs)
}

// waiting records the stacks of the goroutines, other than the caller's,
// that have a frame whose function's name contains fn: a server's
// goroutine that waits for what the caller is answering.
func (w *walk) waiting(fn string) {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range bytes.Split(buf, []byte("\n\n"))[1:] { // the first is the caller's
		lines := strings.Split(string(g), "\n")
		var fs []frame
		for i := 1; i+1 < len(lines); i += 2 {
			name, _, _ := strings.Cut(lines[i], "(")
			file, _, _ := strings.Cut(strings.TrimSpace(lines[i+1]), ":")
			fs = append(fs, frame{name, file})
		}
		if slices.ContainsFunc(fs, func(f frame) bool { return strings.Contains(f.fn, fn) }) &&
			slices.ContainsFunc(fs, func(f frame) bool { return w.rel(f.file) != "" }) {
			w.add(fs)
		}
	}
}

// count is the walk's measure: the module's files its stacks pass
// through; its file crossings, each call from one file into another
// counted once however many stacks hold it; and of those the crossings
// from one package into another.
func (w *walk) count() (files []string, crossings, packages int) {
	seen := map[string]bool{}
	edges := map[string]bool{}
	for _, s := range w.stacks {
		for i, f := range s {
			if !seen[f.file] {
				seen[f.file] = true
				files = append(files, f.file)
			}
			if i == 0 || s[i-1].file == f.file {
				continue
			}
			if e := s[i-1].fn + " → " + f.fn; !edges[e] {
				edges[e] = true
				crossings++
				if filepath.Dir(s[i-1].file) != filepath.Dir(f.file) {
					packages++
				}
			}
		}
	}
	slices.Sort(files)
	return files, crossings, packages
}

// TestCallWalk measures the walk of two calls through the module's files,
// from the door to the tool and to the audit record: one HTTP call (POST
// /tools/{name}), and one stdio call that a person confirms by form,
// with a probe also in the client's form, which sees the server's
// goroutine waiting for the answer. Run it with -v to read the files and
// the counts: how many files a call crosses is how much a reader follows.
//
// The probes see the stacks live at them, not the calls that returned
// before (validation, permissions, limits, the reservation). Every file a
// call runs code of is the difference of two coverage profiles, one
// without the call (for the stdio call, -run TestCallWalk/stdio-form):
//
//	go test -run TestCallWalk/http -covermode=count -coverpkg=./... -coverprofile=/tmp/walk0.out . -args -walk.calls=0
//	go test -run TestCallWalk/http -covermode=count -coverpkg=./... -coverprofile=/tmp/walk1.out . -args -walk.calls=1
//	awk 'NR==FNR{n[$1]=$3;next} FNR>1&&$3>n[$1]{split($1,f,":");print f[1]}' /tmp/walk0.out /tmp/walk1.out | sort -u
func TestCallWalk(t *testing.T) {
	t.Run("http", func(t *testing.T) {
		w := newWalk()
		fn := func(_ context.Context, in WalkNote) (int, error) { w.here(); return in.ID, nil }
		reg := build(t, carmy.New().Logger(quietLogger()).
			Audit(carmy.AuditorFunc(func(context.Context, carmy.AuditRecord) error { w.here(); return nil })).
			Tool(carmy.Tool(fn, carmy.Write, carmy.Name("note"), carmy.Description("Notes."), carmy.Register(false))))
		srv := serve(t, reg)
		if *walkCalls == 0 {
			return
		}
		if status, body := httpDo(t, http.DefaultClient, "POST", srv.URL+"/tools/note", `{"id":1}`); status != 200 {
			t.Fatalf("POST /tools/note = %d %v", status, body)
		}
		reportWalk(t, w, "internal/httpapi/tools.go")
	})
	t.Run("stdio-form", func(t *testing.T) {
		w := newWalk()
		fn := func(_ context.Context, in WalkNote) (int, error) { w.here(); return in.ID, nil }
		reg := build(t, carmy.New().Logger(quietLogger()).
			Audit(carmy.AuditorFunc(func(context.Context, carmy.AuditRecord) error { w.here(); return nil })).
			Tool(carmy.Tool(fn, carmy.Destructive, carmy.Name("delete_note"), carmy.Description("Deletes."), carmy.RequireConfirmation(), carmy.Register(false))))
		s := singleClient(t, reg, "stdio", "", &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			w.waiting("Elicit")
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		}})
		if *walkCalls == 0 {
			return
		}
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "delete_note", Arguments: map[string]any{"id": 7}})
		if err != nil || res.IsError {
			t.Fatalf("the confirmed call = %v, %v", res, err)
		}
		reportWalk(t, w, "internal/mcpserve/")
	})
}

// reportWalk logs the walk's measure, and fails unless the probes saw the
// call pass through door.
func reportWalk(t *testing.T, w *walk, door string) {
	t.Helper()
	files, crossings, packages := w.count()
	t.Logf("%d stacks; %d files; %d file crossings, %d of them between packages", len(w.stacks), len(files), crossings, packages)
	t.Logf("files: %s", strings.Join(files, " "))
	if !slices.ContainsFunc(files, func(f string) bool { return strings.HasPrefix(f, door) }) {
		t.Errorf("the walk's files %v hold nothing of %s", files, door)
	}
}
