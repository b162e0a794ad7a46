package carmy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/carmy-dev/carmy"
)

// AddTodo is the input of add_todo.
type AddTodo struct {
	Title    string   `json:"title" validate:"required,max=80" jsonschema:"description=What to do"`
	Priority uint8    `json:"priority" validate:"max=3" jsonschema:"description=0 (none) to 3 (urgent)"`
	Tags     []string `json:"tags,omitempty" validate:"max=5,dive,min=1,max=20"`
	Notes    *string  `json:"notes"`
}

// Todo is a task on the list.
type Todo struct {
	ID       int      `json:"id"`
	Title    string   `json:"title"`
	Priority uint8    `json:"priority"`
	Tags     []string `json:"tags"`
	Owner    string   `json:"owner"`
	Done     bool     `json:"done"`
}

// TodoList is the application state the tools share.
type TodoList struct {
	mu    sync.Mutex
	todos []Todo
}

func (l *TodoList) add(in AddTodo, owner string) Todo {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := Todo{ID: len(l.todos) + 1, Title: in.Title, Priority: in.Priority, Tags: in.Tags, Owner: owner}
	l.todos = append(l.todos, t)
	return t
}

// addTodo is declared as a tool at package level. Examples and tests say
// Register(false) so that carmy.App() does not pick their tools up.
var addTodoTool = carmy.Tool(addTodo, carmy.Write,
	carmy.Description("Add a task to the to-do list"),
	carmy.ParallelSafe(),
	carmy.Register(false),
)

func addTodo(ctx carmy.Context, list carmy.State[*TodoList], in AddTodo) (Todo, error) {
	return list.Value.add(in, ctx.Principal), nil
}

// CompleteTodo is the input of complete_todo.
type CompleteTodo struct {
	ID int `json:"id" validate:"min=1"`
}

var completeTodoTool = carmy.Tool(completeTodo, carmy.Write, carmy.Idempotent(), carmy.Register(false))

// completeTodo chooses its error code by returning a *carmy.Error.
func completeTodo(list carmy.State[*TodoList], in CompleteTodo) (Todo, error) {
	list.Value.mu.Lock()
	defer list.Value.mu.Unlock()
	if in.ID > len(list.Value.todos) {
		return Todo{}, carmy.Errorf(carmy.CodeNotFound, "there is no task %d; the list has %d", in.ID, len(list.Value.todos))
	}
	t := &list.Value.todos[in.ID-1]
	t.Done = true
	return *t, nil
}

// ImportTodos is the input of import_todos.
type ImportTodos struct {
	Items  []AddTodo         `json:"items" validate:"min=1,max=50"`
	Labels map[string]string `json:"labels,omitempty" validate:"dive,max=10"`
}

var importTodosTool = carmy.Tool(importTodos, carmy.Write, carmy.Register(false))

func importTodos(ctx carmy.Context, list carmy.State[*TodoList], in ImportTodos) ([]Todo, error) {
	var out []Todo
	for _, item := range in.Items {
		out = append(out, list.Value.add(item, ctx.Principal))
	}
	return out, nil
}

// buildTodos builds a registry of the to-do tools over an empty list. The
// caller closes it.
func buildTodos() *carmy.Registry {
	reg, err := carmy.New().
		Tool(addTodoTool, completeTodoTool, importTodosTool).
		State(&TodoList{}).
		Build()
	if err != nil {
		panic(err)
	}
	return reg
}

// A tool is a typed function, an effect and options. Build derives its name
// and schemas.
func ExampleTool() {
	reg, err := carmy.New().Tool(addTodoTool).State(&TodoList{}).Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()
	m, _ := reg.Lookup("add_todo")
	fmt.Println("name:", m.Name)
	fmt.Println("effect:", m.Effect)
	fmt.Println("description:", m.Description)
	fmt.Println("parallel safe:", m.ParallelSafe)
	fmt.Println("confirmation:", m.Confirmation)
	fmt.Println("input schema:", string(m.InputSchema))
	// Output:
	// name: add_todo
	// effect: write
	// description: Add a task to the to-do list
	// parallel safe: true
	// confirmation: none
	// input schema: {"type":"object","properties":{"title":{"type":"string","description":"What to do","minLength":1,"maxLength":80},"priority":{"type":"integer","description":"0 (none) to 3 (urgent)","minimum":0,"maximum":3},"tags":{"type":"array","items":{"type":"string","minLength":1,"maxLength":20},"maxItems":5},"notes":{"type":["string","null"]}},"required":["title","priority"],"additionalProperties":false}
}

// Untyped is an input whose validate tag a validator would misread:
// required on a number means non-zero.
type Untyped struct {
	Count int `json:"count" validate:"required"`
}

func twoInputs(a AddTodo, b CompleteTodo) error { return nil }

func needsList(list carmy.State[*TodoList]) error { return nil }

// Build reports every problem at once, each a *carmy.BuildError naming the
// tool and the file:line of its declaration (Site).
func ExampleBuilder_Build_errors() {
	_, err := carmy.New().Tool(
		carmy.Tool(twoInputs, carmy.Write, carmy.Register(false)),
		carmy.Tool(func(in Untyped) error { return nil }, 0, carmy.Register(false)),
		carmy.Tool(needsList, carmy.Read, carmy.Register(false)),
		carmy.Tool(addTodo, carmy.Write, carmy.Idempotent(), carmy.Timeout(-1), carmy.Name("add todo"), carmy.Register(false)),
	).Build()

	// err is an errors.Join of *carmy.BuildError values.
	joined, _ := err.(interface{ Unwrap() []error })
	for _, e := range joined.Unwrap() {
		var be *carmy.BuildError
		if !errors.As(e, &be) {
			continue
		}
		tool := be.Tool
		if tool == "" {
			tool = "(unnamed)"
		}
		// be.Site is "path/to/file.go:line"; print the file name only.
		file, _, _ := strings.Cut(filepath.Base(be.Site), ":")
		fmt.Printf("%s (%s): %v\n", tool, file, be.Err)
	}
	// Output:
	// two_inputs (example_test.go): takes at most one input; combine the fields into one struct (parameters 1 and 2 are both inputs)
	// (unnamed) (example_test.go): is a closure or anonymous function, which has no usable name; give it one with carmy.Name
	// (unnamed) (example_test.go): has no effect (effect(0)); pass one of carmy.None, Read, Write, ExternalWrite or Destructive
	// (unnamed) (example_test.go): input carmy_test.Untyped.Count: validate:"required": required on the int field means non-zero to the validator, so 0 would be refused: say min=1, or use a pointer (*int) if the key must be present and not null
	// needs_list (example_test.go): needs carmy.State[*carmy_test.TodoList], but the builder has no value of that type: provide one with Builder.State
	// add todo (example_test.go): Timeout(-1ns) must be positive
	// add todo (example_test.go): has the invalid name "add todo"; a name is 1 to 128 ASCII letters, digits, '_', '-' or '.'
}

// Invoke calls a tool from Go, as tests and application code do: the input
// is encoded, decoded and validated exactly as an agent's would be.
func ExampleInvoke() {
	reg := buildTodos()
	defer reg.Close()
	ctx := context.Background()

	todo, err := carmy.Invoke[Todo](ctx, reg, "add_todo",
		AddTodo{Title: "Water the plants", Priority: 2},
		carmy.WithPrincipal("alice"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d %q owner=%s tags=%v\n", todo.ID, todo.Title, todo.Owner, todo.Tags)

	// A raw JSON input goes in as is.
	todo, err = carmy.Invoke[Todo](ctx, reg, "complete_todo", json.RawMessage(`{"id":1}`))
	fmt.Println(todo.Done, err)
	// Output:
	// 1 "Water the plants" owner=alice tags=[]
	// true <nil>
}

// Execute is the registry's entry point for hosts: a call carries the input
// as JSON, and the result holds the output as JSON.
func ExampleRegistry_Execute() {
	reg := buildTodos()
	defer reg.Close()
	res, err := reg.Execute(context.Background(), carmy.Call{
		Tool:      "add_todo",
		Input:     json.RawMessage(`{"title":"Buy milk","priority":1,"tags":["shop"]}`),
		Principal: "bob",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(res.Output))
	fmt.Println("has execution id:", res.ExecutionID != "")
	// Output:
	// {"id":1,"title":"Buy milk","priority":1,"tags":["shop"],"owner":"bob","done":false}
	// has execution id: true
}

// CountWords is the input of the hand-written count_words tool.
type CountWords struct {
	Text string `json:"text" validate:"required"`
}

// WordCount is its output.
type WordCount struct {
	Words int `json:"words"`
}

// wordCounter is a tool written by hand: its metadata is a method, and its
// input arrives decoded and validated.
type wordCounter struct{}

func (wordCounter) Metadata() carmy.ToolMetadata {
	return carmy.ToolMetadata{
		Name:         "count_words",
		Description:  "Count the words in a text",
		Effect:       carmy.None,
		Idempotent:   true,
		ParallelSafe: true,
		// InputSchema and OutputSchema are nil: they default to
		// SchemaFor[CountWords]() and SchemaFor[WordCount]().
	}
}

func (wordCounter) Execute(ctx carmy.Context, in CountWords) (WordCount, error) {
	return WordCount{Words: len(strings.Fields(in.Text))}, nil
}

// Impl turns a ToolHandler into a tool. Impl tools are never registered
// automatically.
func ExampleImpl() {
	reg, err := carmy.New().Tool(carmy.Impl[CountWords, WordCount](wordCounter{})).Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()
	m, _ := reg.Lookup("count_words")
	fmt.Println(m.Name, m.Effect, string(m.InputSchema))

	n, err := carmy.Invoke[WordCount](context.Background(), reg, "count_words", CountWords{Text: "the quick brown fox"})
	fmt.Println(n.Words, err)

	_, err = carmy.Invoke[WordCount](context.Background(), reg, "count_words", CountWords{})
	fmt.Println(carmy.CodeOf(err))
	// Output:
	// count_words none {"type":"object","properties":{"text":{"type":"string","minLength":1}},"required":["text"],"additionalProperties":false}
	// 4 <nil>
	// invalid_input
}

// SchemaFor shows the schema carmy publishes for a type: non-pointer fields
// without omitempty are required, pointers are optional and nullable, and
// validate rules become keywords.
func ExampleSchemaFor() {
	var out bytes.Buffer
	if err := json.Indent(&out, carmy.SchemaFor[AddTodo](), "", "  "); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out.String())
	// Output:
	// {
	//   "type": "object",
	//   "properties": {
	//     "title": {
	//       "type": "string",
	//       "description": "What to do",
	//       "minLength": 1,
	//       "maxLength": 80
	//     },
	//     "priority": {
	//       "type": "integer",
	//       "description": "0 (none) to 3 (urgent)",
	//       "minimum": 0,
	//       "maximum": 3
	//     },
	//     "tags": {
	//       "type": "array",
	//       "items": {
	//         "type": "string",
	//         "minLength": 1,
	//         "maxLength": 20
	//       },
	//       "maxItems": 5
	//     },
	//     "notes": {
	//       "type": [
	//         "string",
	//         "null"
	//       ]
	//     }
	//   },
	//   "required": [
	//     "title",
	//     "priority"
	//   ],
	//   "additionalProperties": false
	// }
}

// CodeOf tells what kind of failure an error is. A tool chooses the code by
// returning a *carmy.Error; any other error becomes internal.
func ExampleCodeOf() {
	reg := buildTodos()
	defer reg.Close()
	_, err := carmy.Invoke[Todo](context.Background(), reg, "complete_todo", CompleteTodo{ID: 7})
	fmt.Println(carmy.CodeOf(err))

	var e *carmy.Error
	if errors.As(err, &e) {
		fmt.Println(e.Message)
		fmt.Println("retryable:", e.Retryable)
	}

	fmt.Printf("%q\n", carmy.CodeOf(nil))
	fmt.Println(carmy.CodeOf(errors.New("disk on fire")))
	fmt.Println(carmy.CodeOf(fmt.Errorf("saving: %w", carmy.Errorf(carmy.CodeUnavailable, "the database is down"))))
	// Output:
	// not_found
	// there is no task 7; the list has 0
	// retryable: false
	// ""
	// internal
	// unavailable
}

// An invalid input is refused before the tool runs, with one FieldError per
// problem, located by JSON path, so that a model can fix its call.
func ExampleFieldError() {
	reg := buildTodos()
	defer reg.Close()
	_, err := reg.Execute(context.Background(), carmy.Call{
		Tool: "import_todos",
		Input: json.RawMessage(`{
			"items": [
				{"title": "Call mum", "priority": 1},
				{"title": "", "priority": 7, "tag": ["x"]}
			],
			"labels": {"team.name": "platform-engineering"}
		}`),
	})
	var e *carmy.Error
	if errors.As(err, &e) {
		fmt.Println(e.Code)
		for _, f := range e.Fields {
			fmt.Printf("%s: %s\n", f.Path, f.Message)
		}
	}
	// Output:
	// invalid_input
	// items[1].tag: unknown field "tag"; did you mean "tags"? (names are case-sensitive)
	// items[1].title: must not be empty
	// items[1].priority: must be at most 3
	// labels["team.name"]: must have at most 10 characters, not 20
}
