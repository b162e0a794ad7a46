package storetest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/carmy-dev/carmy/store"
)

// TestTaskStore runs the task suite. newStore must return a fresh store
// each time, whose tasks no other store shares, bounded as the defaults
// say ([store.DefaultTaskLimit], [store.DefaultTaskBytes]).
func TestTaskStore(t *testing.T, newStore func(t *testing.T) store.TaskStore) {
	ctx := context.Background()
	task := func(principal, tool, rid string) store.Task {
		return store.Task{Principal: principal, Tool: tool, RequestID: rid, TTL: time.Hour}
	}
	create := func(t *testing.T, s store.TaskStore, in store.Task, lease time.Duration) (store.Task, bool) {
		t.Helper()
		got, created, err := s.CreateTask(ctx, in, lease)
		if err != nil {
			t.Fatalf("CreateTask: %v", err)
		}
		return got, created
	}
	get := func(t *testing.T, s store.TaskStore, id string) store.Task {
		t.Helper()
		got, err := s.GetTask(ctx, id)
		if err != nil {
			t.Fatalf("GetTask(%s): %v", id, err)
		}
		return got
	}

	t.Run("CreateTask records a working task that GetTask returns", func(t *testing.T) {
		s := newStore(t)
		in := task("alice", "export", "r1")
		in.Digest = "d1"
		a, created := create(t, s, in, long)
		if !created || a.ID == "" || a.Status != store.TaskWorking || a.Created.IsZero() || a.Lease.Before(time.Now()) {
			t.Fatalf("CreateTask = %+v, %v; want a new working task with an id and a lease", a, created)
		}
		got := get(t, s, a.ID)
		if got.Principal != "alice" || got.Tool != "export" || got.RequestID != "r1" || got.Digest != "d1" || got.Status != store.TaskWorking || got.Lost || got.CancelRequested {
			t.Fatalf("GetTask = %+v", got)
		}
		b, _ := create(t, s, task("alice", "export", ""), long)
		if b.ID == a.ID {
			t.Fatal("two tasks got one id")
		}
	})

	t.Run("a request id makes one task per principal and tool", func(t *testing.T) {
		s := newStore(t)
		a, _ := create(t, s, task("alice", "export", "r1"), long)
		again, created := create(t, s, task("alice", "export", "r1"), long)
		if created || again.ID != a.ID {
			t.Fatalf("CreateTask again = %s, created %v; want %s, not created", again.ID, created, a.ID)
		}
		for _, other := range []store.Task{task("bob", "export", "r1"), task("alice", "import", "r1"), task("alice", "export", "r2")} {
			if b, created := create(t, s, other, long); !created || b.ID == a.ID {
				t.Fatalf("CreateTask(%+v) = %s, created %v; want a new task", other, b.ID, created)
			}
		}
	})

	t.Run("unknown ids are not found", func(t *testing.T) {
		s := newStore(t)
		_, errGet := s.GetTask(ctx, "nope")
		_, errUpdate := s.UpdateTask(ctx, "nope", store.TaskUpdate{Status: store.TaskCompleted})
		_, errCancel := s.CancelTask(ctx, "nope")
		for name, err := range map[string]error{"GetTask": errGet, "UpdateTask": errUpdate, "CancelTask": errCancel} {
			if !errors.Is(err, store.ErrTaskNotFound) {
				t.Errorf("%s = %v; want ErrTaskNotFound", name, err)
			}
		}
	})

	t.Run("updates change the task and its version until it is final", func(t *testing.T) {
		s := newStore(t)
		a, _ := create(t, s, task("alice", "export", "r1"), long)
		p, err := s.UpdateTask(ctx, a.ID, store.TaskUpdate{Progress: []byte(`{"done":1}`)})
		if err != nil || string(p.Progress) != `{"done":1}` || p.Version <= a.Version {
			t.Fatalf("UpdateTask(progress) = %+v, %v", p, err)
		}
		w, err := s.UpdateTask(ctx, a.ID, store.TaskUpdate{Status: store.TaskInputRequired, ApprovalID: "ap1"})
		if err != nil || w.Status != store.TaskInputRequired || w.ApprovalID != "ap1" || w.Version <= p.Version {
			t.Fatalf("UpdateTask(input_required) = %+v, %v", w, err)
		}
		done, err := s.UpdateTask(ctx, a.ID, store.TaskUpdate{Status: store.TaskCompleted, ExecutionID: "e1", Output: []byte(`{"rows":3}`)})
		if err != nil || done.Status != store.TaskCompleted || done.ApprovalID != "" || done.ExecutionID != "e1" || string(done.Output) != `{"rows":3}` {
			t.Fatalf("UpdateTask(completed) = %+v, %v", done, err)
		}
		got := get(t, s, a.ID)
		if got.Status != store.TaskCompleted || string(got.Output) != `{"rows":3}` || string(got.Progress) != `{"done":1}` {
			t.Fatalf("GetTask = %+v", got)
		}
		got.Output[0] = 'X'
		if again := get(t, s, a.ID); string(again.Output) != `{"rows":3}` {
			t.Fatalf("Output = %s after the caller changed its copy", again.Output)
		}
		late, err := s.UpdateTask(ctx, a.ID, store.TaskUpdate{Status: store.TaskFailed, Error: []byte(`{}`)})
		if !errors.Is(err, store.ErrTaskState) || late.Status != store.TaskCompleted {
			t.Fatalf("UpdateTask of a final task = %s, %v; want completed, ErrTaskState", late.Status, err)
		}
		if _, err := s.CancelTask(ctx, a.ID); !errors.Is(err, store.ErrTaskState) {
			t.Fatalf("CancelTask of a final task = %v; want ErrTaskState", err)
		}
	})

	t.Run("questions are replaced and answers added, waking those who await", func(t *testing.T) {
		s := newStore(t)
		a, _ := create(t, s, task("alice", "export", ""), long)
		q, err := s.UpdateTask(ctx, a.ID, store.TaskUpdate{Status: store.TaskInputRequired, Questions: []byte(`{"confirm":{"message":"Sure?"}}`)})
		if err != nil || q.Status != store.TaskInputRequired || string(q.Questions) != `{"confirm":{"message":"Sure?"}}` {
			t.Fatalf("UpdateTask(questions) = %+v, %v", q, err)
		}
		got := make(chan store.Task, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			v, _ := s.AwaitTask(wctx, a.ID, q.Version)
			got <- v
		}()
		time.Sleep(50 * time.Millisecond) // let it wait
		if _, err := s.UpdateTask(ctx, a.ID, store.TaskUpdate{Answers: map[string][]byte{"confirm": []byte(`{"action":"accept"}`)}}); err != nil {
			t.Fatal(err)
		}
		select {
		case v := <-got:
			if string(v.Answers["confirm"]) != `{"action":"accept"}` {
				t.Fatalf("AwaitTask woke with answers %q; want the answer", v.Answers)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("AwaitTask was not woken by the answer")
		}
		// Another answer is added; one to the same question replaces it.
		if _, err := s.UpdateTask(ctx, a.ID, store.TaskUpdate{Answers: map[string][]byte{"name": []byte(`{"action":"decline"}`)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpdateTask(ctx, a.ID, store.TaskUpdate{Answers: map[string][]byte{"confirm": []byte(`{"action":"cancel"}`)}}); err != nil {
			t.Fatal(err)
		}
		w, err := s.UpdateTask(ctx, a.ID, store.TaskUpdate{Status: store.TaskWorking, Questions: []byte(`{}`)})
		if err != nil || w.Status != store.TaskWorking || string(w.Questions) != `{}` {
			t.Fatalf("UpdateTask(working) = %+v, %v", w, err)
		}
		g := get(t, s, a.ID)
		if len(g.Answers) != 2 || string(g.Answers["confirm"]) != `{"action":"cancel"}` || string(g.Answers["name"]) != `{"action":"decline"}` {
			t.Fatalf("Answers = %q; want both questions' latest answers", g.Answers)
		}
		g.Answers["confirm"][0] = 'X'
		if again := get(t, s, a.ID); string(again.Answers["confirm"]) != `{"action":"cancel"}` {
			t.Fatalf("Answers = %q after the caller changed its copy", again.Answers)
		}
	})

	t.Run("Release frees the request id", func(t *testing.T) {
		s := newStore(t)
		a, _ := create(t, s, task("alice", "export", "r1"), long)
		if _, err := s.UpdateTask(ctx, a.ID, store.TaskUpdate{Status: store.TaskFailed, Error: []byte(`{"code":"invalid_input"}`), Release: true}); err != nil {
			t.Fatal(err)
		}
		if b, created := create(t, s, task("alice", "export", "r1"), long); !created || b.ID == a.ID {
			t.Fatalf("CreateTask after Release = %s, created %v; want a new task", b.ID, created)
		}
		if got := get(t, s, a.ID); got.Status != store.TaskFailed {
			t.Fatalf("the released task is %s; want it kept, failed", got.Status)
		}
	})

	t.Run("a cancel wakes those who await the task", func(t *testing.T) {
		s := newStore(t)
		a, _ := create(t, s, task("alice", "export", ""), long)
		got := make(chan store.Task, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			v, _ := s.AwaitTask(wctx, a.ID, a.Version)
			got <- v
		}()
		time.Sleep(50 * time.Millisecond) // let it wait
		c, err := s.CancelTask(ctx, a.ID)
		if err != nil || !c.CancelRequested {
			t.Fatalf("CancelTask = %+v, %v", c, err)
		}
		select {
		case v := <-got:
			if !v.CancelRequested {
				t.Fatalf("AwaitTask woke with %+v; want the cancel request", v)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("AwaitTask was not woken by the cancel")
		}
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		c = get(t, s, a.ID)
		if v, err := s.AwaitTask(wctx, a.ID, c.Version); !errors.Is(err, context.DeadlineExceeded) || v.ID != a.ID {
			t.Fatalf("AwaitTask of an unchanged task = %v, %v; want the task and the deadline", v.ID, err)
		}
	})

	t.Run("a task whose lease lapses is failed and lost, for good", func(t *testing.T) {
		s := newStore(t)
		a, _ := create(t, s, task("alice", "export", "r1"), 300*time.Millisecond)
		renewed, _ := create(t, s, task("alice", "export", "r2"), 300*time.Millisecond)
		for range 4 {
			time.Sleep(100 * time.Millisecond)
			if _, err := s.UpdateTask(ctx, renewed.ID, store.TaskUpdate{Lease: 300 * time.Millisecond}); err != nil {
				t.Fatalf("renewal: %v", err)
			}
		}
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		got, err := s.AwaitTask(wctx, a.ID, a.Version)
		if err != nil || got.Status != store.TaskFailed || !got.Lost {
			t.Fatalf("AwaitTask past the lease = %+v, %v; want failed and lost", got, err)
		}
		if _, err := s.UpdateTask(ctx, a.ID, store.TaskUpdate{Status: store.TaskCompleted, Output: []byte(`{}`)}); !errors.Is(err, store.ErrTaskState) {
			t.Fatalf("UpdateTask of a lost task = %v; want ErrTaskState", err)
		}
		if again, created := create(t, s, task("alice", "export", "r1"), long); created || again.ID != a.ID || !again.Lost {
			t.Fatalf("CreateTask with the lost task's request id = %+v, created %v; want the lost task", again, created)
		}
		if r := get(t, s, renewed.ID); r.Status != store.TaskWorking || r.Lost {
			t.Fatalf("the renewed task = %+v; want it working", r)
		}
	})

	t.Run("ListTasks pages a principal's tasks, newest first", func(t *testing.T) {
		s := newStore(t)
		var ids []string
		for i := range 5 {
			a, _ := create(t, s, task("alice", "export", "r"+strconv.Itoa(i)), long)
			ids = append(ids, a.ID)
			time.Sleep(2 * time.Millisecond)
		}
		create(t, s, task("bob", "export", "r0"), long)
		var got []string
		before := ""
		for range 10 {
			page, err := s.ListTasks(ctx, "alice", before, 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			for _, p := range page {
				if p.Principal != "alice" {
					t.Fatalf("ListTasks(alice) holds %s's task", p.Principal)
				}
				got = append(got, p.ID)
			}
			before = page[len(page)-1].ID
		}
		want := []string{ids[4], ids[3], ids[2], ids[1], ids[0]}
		if len(got) != len(want) {
			t.Fatalf("ListTasks pages = %v; want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("ListTasks pages = %v; want %v", got, want)
			}
		}
	})

	t.Run("a final task is kept for its TTL", func(t *testing.T) {
		s := newStore(t)
		in := task("alice", "export", "r1")
		in.TTL = 200 * time.Millisecond
		a, _ := create(t, s, in, long)
		if _, err := s.UpdateTask(ctx, a.ID, store.TaskUpdate{Status: store.TaskCompleted, Output: []byte(`1`)}); err != nil {
			t.Fatal(err)
		}
		get(t, s, a.ID)
		time.Sleep(400 * time.Millisecond)
		if _, err := s.GetTask(ctx, a.ID); !errors.Is(err, store.ErrTaskNotFound) {
			t.Fatalf("GetTask past the TTL = %v; want ErrTaskNotFound", err)
		}
		if b, created := create(t, s, task("alice", "export", "r1"), long); !created || b.ID == a.ID {
			t.Fatal("the request id of a task past its TTL still names it")
		}
	})

	t.Run("tasks are bounded per principal in count and bytes", func(t *testing.T) {
		s := newStore(t)
		for i := range store.DefaultTaskLimit {
			if _, _, err := s.CreateTask(ctx, task("alice", "export", ""), long); err != nil {
				t.Fatalf("CreateTask %d: %v", i, err)
			}
		}
		if _, _, err := s.CreateTask(ctx, task("alice", "export", ""), long); !errors.Is(err, store.ErrTaskCapacity) {
			t.Fatalf("CreateTask beyond the count = %v; want ErrTaskCapacity", err)
		}
		if _, _, err := s.CreateTask(ctx, task("bob", "export", ""), long); err != nil {
			t.Fatalf("another principal's CreateTask = %v", err)
		}
		big := bytes.Repeat([]byte("x"), 1<<20)
		for i := 0; i < store.DefaultTaskBytes>>20-1; i++ {
			b, _, err := s.CreateTask(ctx, task("carol", "export", ""), long)
			if err != nil {
				t.Fatalf("CreateTask %d: %v", i, err)
			}
			if _, err := s.UpdateTask(ctx, b.ID, store.TaskUpdate{Status: store.TaskCompleted, Output: big}); err != nil {
				t.Fatal(err)
			}
		}
		withInput := task("carol", "export", "")
		withInput.InputSize = len(big)
		if _, _, err := s.CreateTask(ctx, withInput, long); !errors.Is(err, store.ErrTaskCapacity) {
			t.Fatalf("CreateTask of an input beyond the bytes = %v; want ErrTaskCapacity", err)
		}
		if _, _, err := s.CreateTask(ctx, task("carol", "export", ""), long); err != nil {
			t.Fatalf("CreateTask of a task that fits = %v", err)
		}
	})

	t.Run("task bytes are bounded whenever they grow", func(t *testing.T) {
		s := newStore(t)
		mib := bytes.Repeat([]byte("x"), 1<<20)
		in := task("carol", "echo", "")
		in.InputSize = len(mib)
		var kept []store.Task
		for {
			a, _, err := s.CreateTask(ctx, in, long)
			if errors.Is(err, store.ErrTaskCapacity) {
				break
			}
			if err != nil || len(kept) > store.DefaultTaskBytes>>20 {
				t.Fatalf("CreateTask %d of a 1 MiB input = %v; want ErrTaskCapacity by the %dth", len(kept), err, store.DefaultTaskBytes>>20)
			}
			kept = append(kept, a)
		}
		held := func() int {
			n := 0
			for _, k := range kept {
				n += get(t, s, k.ID).Size()
			}
			return n
		}
		if got := get(t, s, kept[0].ID); got.InputSize != len(mib) {
			t.Fatalf("InputSize = %d; want %d", got.InputSize, len(mib))
		}
		if n := held(); n > store.DefaultTaskBytes || len(kept) < store.DefaultTaskBytes>>20-1 {
			t.Fatalf("%d tasks of 1 MiB inputs hold %d bytes; want as many as fit in %d", len(kept), n, store.DefaultTaskBytes)
		}
		// An output takes its input's place.
		if _, err := s.UpdateTask(ctx, kept[0].ID, store.TaskUpdate{Status: store.TaskCompleted, Output: mib}); err != nil {
			t.Fatalf("an output the size of its input = %v; want it kept", err)
		}
		// Growth that does not fit changes nothing.
		before := get(t, s, kept[1].ID)
		for name, u := range map[string]store.TaskUpdate{
			"an output":               {Status: store.TaskCompleted, Output: append(slices.Clone(mib), mib...)},
			"an output while working": {Output: append(slices.Clone(mib), mib...)},
			"progress":                {Progress: append(slices.Clone(mib), mib...)},
			"questions":               {Status: store.TaskInputRequired, Questions: append(slices.Clone(mib), mib...)},
			"an answer":               {Answers: map[string][]byte{"q": append(slices.Clone(mib), mib...)}},
			"with lease":              {Progress: append(slices.Clone(mib), mib...), Lease: long},
		} {
			if _, err := s.UpdateTask(ctx, kept[1].ID, u); !errors.Is(err, store.ErrTaskCapacity) {
				t.Fatalf("UpdateTask growing %s past the bound = %v; want ErrTaskCapacity", name, err)
			}
		}
		after := get(t, s, kept[1].ID)
		if after.Version != before.Version || after.Status != store.TaskWorking || after.Output != nil || after.Progress != nil || after.Questions != nil || len(after.Answers) > 0 || !after.Lease.Equal(before.Lease) {
			t.Fatalf("a refused update changed the task: %+v; want %+v", after, before)
		}
		if n := held(); n > store.DefaultTaskBytes {
			t.Fatalf("the tasks hold %d bytes; want at most %d", n, store.DefaultTaskBytes)
		}
		// A task always ends without an output, freeing its input.
		if _, err := s.UpdateTask(ctx, kept[1].ID, store.TaskUpdate{Status: store.TaskFailed, Error: []byte(`{"code":"unavailable","details":{"reason":"output_too_large"}}`)}); err != nil {
			t.Fatalf("ending a task with an error = %v; want it applied", err)
		}
		if _, _, err := s.CreateTask(ctx, in, long); err != nil {
			t.Fatalf("CreateTask once a task freed its input = %v", err)
		}
		other := in
		other.Principal = "dave"
		if _, _, err := s.CreateTask(ctx, other, long); err != nil {
			t.Fatalf("another principal's CreateTask = %v", err)
		}
	})

	t.Run("an output kept while the task works counts at once, wakes nobody, and stays when it ends", func(t *testing.T) {
		// A host keeps a tool's output on its task before it records the
		// outcome for the request id, and ends the task after the call's
		// audit record, without the output again. Until then readers show
		// no output, so nobody is woken for it.
		s := newStore(t)
		in := task("carol", "echo", "")
		in.InputSize = 10
		a, _ := create(t, s, in, long)
		out := []byte(`{"text":"kept"}`)
		got, err := s.UpdateTask(ctx, a.ID, store.TaskUpdate{Output: out})
		if err != nil || got.Status != store.TaskWorking || !bytes.Equal(got.Output, out) {
			t.Fatalf("UpdateTask with an output alone = %+v, %v; want it kept, the task working", got, err)
		}
		if cur := get(t, s, a.ID); cur.Status != store.TaskWorking || !bytes.Equal(cur.Output, out) || cur.Version != a.Version {
			t.Fatalf("GetTask = %+v; want the output kept on a working task, its version as it was", cur)
		} else if want := len(cur.ID) + len(cur.Tool) + len(out); cur.Size() != want {
			t.Fatalf("Size = %d; want %d: the output counts, and takes its input's place", cur.Size(), want)
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if got, err := s.AwaitTask(short, a.ID, a.Version); err == nil || got.Version != a.Version {
			t.Fatalf("AwaitTask after an output alone = %+v, %v; want nobody woken", got, err)
		}
		got, err = s.UpdateTask(ctx, a.ID, store.TaskUpdate{Status: store.TaskCompleted, ExecutionID: "e1", Progress: []byte(`{"done":1}`)})
		if err != nil || got.Status != store.TaskCompleted || !bytes.Equal(got.Output, out) {
			t.Fatalf("ending the task without its output = %+v, %v; want it completed with the output kept", got, err)
		}
		if cur := get(t, s, a.ID); cur.Status != store.TaskCompleted || !bytes.Equal(cur.Output, out) || cur.ExecutionID != "e1" || cur.Version <= a.Version {
			t.Fatalf("GetTask = %+v; want the completed task with its output", cur)
		}
	})

	t.Run("ListTasks pages summaries; GetTask returns the whole task", func(t *testing.T) {
		s := newStore(t)
		a, _ := create(t, s, task("alice", "export", ""), long)
		if _, err := s.UpdateTask(ctx, a.ID, store.TaskUpdate{Status: store.TaskCompleted, ExecutionID: "e1", Output: []byte(`{"rows":3}`), Progress: []byte(`{"done":1}`)}); err != nil {
			t.Fatal(err)
		}
		b, _ := create(t, s, task("alice", "export", ""), long)
		if _, err := s.UpdateTask(ctx, b.ID, store.TaskUpdate{Status: store.TaskInputRequired, Questions: []byte(`{"q":{"message":"Sure?"}}`), Answers: map[string][]byte{"q": []byte(`{"action":"accept"}`)}}); err != nil {
			t.Fatal(err)
		}
		page, err := s.ListTasks(ctx, "alice", "", 10)
		if err != nil || len(page) != 2 {
			t.Fatalf("ListTasks = %d tasks, %v; want 2", len(page), err)
		}
		for _, p := range page {
			if p.Output != nil || p.Questions != nil || p.Answers != nil {
				t.Fatalf("ListTasks holds %s's output, questions or answers: %+v", p.ID, p)
			}
			if p.ID == a.ID && (p.Status != store.TaskCompleted || p.ExecutionID != "e1" || string(p.Progress) != `{"done":1}`) {
				t.Fatalf("the completed task's summary = %+v", p)
			}
			if p.ID == b.ID && p.Status != store.TaskInputRequired {
				t.Fatalf("the waiting task's summary = %+v", p)
			}
		}
		if got := get(t, s, a.ID); string(got.Output) != `{"rows":3}` {
			t.Fatalf("GetTask's output = %s; want the whole task", got.Output)
		}
		if got := get(t, s, b.ID); string(got.Questions) != `{"q":{"message":"Sure?"}}` || len(got.Answers) != 1 {
			t.Fatalf("GetTask = %+v; want its questions and answers", got)
		}
	})
}
