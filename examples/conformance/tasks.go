package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/carmy-dev/carmy"
)

// The fixtures of the suite's tasks scenarios (the tasks extension of the
// sessionless protocol, io.modelcontextprotocol/tasks). A tool runs as a
// task by its carmy.Tasks mode: greet never does, the others do when the
// client declared the extension, and failing_job and test_tool_with_task
// only then. Their questions are Context.Elicit's, which in a task wait
// for the client's tasks/update; test_tool_with_task asks its question in
// an input-required round first, and its task starts with the answer
// (carmy.TaskAfterInput).

// GreetInput is greet's input.
type GreetInput struct {
	Name string `json:"name" jsonschema:"description=Whom to greet"`
}

// ComputeInput is slow_compute's input.
type ComputeInput struct {
	Seconds float64 `json:"seconds" jsonschema:"description=How long to work in seconds"`
	Label   string  `json:"label,omitempty" jsonschema:"description=A name for the run"`
}

// DeleteInput is confirm_delete's input.
type DeleteInput struct {
	Filename string `json:"filename" jsonschema:"description=The file to delete"`
}

// DeleteConfirmation is the question of confirm_delete.
type DeleteConfirmation struct {
	Confirm bool `json:"confirm"`
}

// Part is each question of multi_input.
type Part struct {
	Name    string `json:"name,omitempty"`
	Confirm bool   `json:"confirm,omitempty"`
}

// taskTools are the carmy tools of the tasks scenarios.
func taskTools() []*carmy.ToolDef {
	return []*carmy.ToolDef{
		carmy.Tool(func(in GreetInput) (carmy.Content, error) {
			return carmy.Content{carmy.Text{Text: "Hello, " + in.Name + "!"}}, nil
		}, carmy.None, carmy.Name("greet"), carmy.Tasks(carmy.TaskForbidden),
			carmy.Description("Greets, at once: never a task")),
		carmy.Tool(func(ctx carmy.Context, in ComputeInput) (carmy.Content, error) {
			select {
			case <-time.After(time.Duration(in.Seconds * float64(time.Second))):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return carmy.Content{carmy.Text{Text: fmt.Sprintf("computed %s after %vs", in.Label, in.Seconds)}}, nil
		}, carmy.None, carmy.Name("slow_compute"), carmy.Timeout(5*time.Minute),
			carmy.Description("Works for the given seconds, then answers; a task when the client takes tasks")),
		carmy.Tool(func(ctx carmy.Context) error {
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return ctx.Err()
			}
			return carmy.Errorf(carmy.CodeInvalidInput, "the job failed, as it always does")
		}, carmy.None, carmy.Name("failing_job"), carmy.Tasks(carmy.TaskRequired),
			carmy.Description("Fails after a second; runs only as a task")),
		carmy.Tool(func() error {
			panic("protocol_error_job fails the server's way")
		}, carmy.None, carmy.Name("protocol_error_job"),
			carmy.Description("Panics: its task fails with a protocol error")),
		carmy.Tool(func(ctx carmy.Context, in DeleteInput) (carmy.Content, error) {
			var c DeleteConfirmation
			if ok, err := ctx.Elicit("Delete "+in.Filename+"?", &c); err != nil || !ok {
				return nil, declined(err)
			}
			return carmy.Content{carmy.Text{Text: fmt.Sprintf("deleted %s: %v", in.Filename, c.Confirm)}}, nil
		}, carmy.None, carmy.Name("confirm_delete"),
			carmy.Description("Asks the user to confirm, then deletes (nothing, here)")),
		carmy.Tool(func(ctx carmy.Context) (carmy.Content, error) {
			// Both questions at once: a task waits for both answers.
			var parts [2]Part
			var errs [2]error
			var wg sync.WaitGroup
			for i := range parts {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, errs[i] = ctx.Elicit(fmt.Sprintf("Part %d", i+1), &parts[i])
				}()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					return nil, err
				}
			}
			return carmy.Content{carmy.Text{Text: parts[0].Name + " and " + parts[1].Name}}, nil
		}, carmy.None, carmy.Name("multi_input"),
			carmy.Description("Asks two questions at once")),
		carmy.Tool(func(ctx carmy.Context) (carmy.Content, error) {
			var u UserName
			if ok, err := ctx.Elicit("What is your name?", &u); err != nil || !ok {
				return nil, declined(err)
			}
			return carmy.Content{carmy.Text{Text: "Hello, " + u.Name + "!"}}, nil
		}, carmy.None, carmy.Name("test_tool_with_task"), carmy.Tasks(carmy.TaskRequired), carmy.TaskAfterInput(),
			carmy.Description("Asks the user's name in a round, then greets as a task")),
	}
}
