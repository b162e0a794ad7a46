package carmy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/carmy-dev/carmy"
)

// Rename is the form the rename tool of the example asks its user to fill.
type Rename struct {
	Name string `json:"name" validate:"min=1"`
}

// A task's tool that asks with Context.Elicit waits for its answer: the
// task is input_required and lists the question. Whoever holds the task,
// on any host sharing the store, answers it, and the tool goes on.
func ExampleTask_Answer() {
	rename := carmy.Tool(func(ctx carmy.Context) (string, error) {
		var r Rename
		ok, err := ctx.Elicit("What should the account be called?", &r)
		if err != nil || !ok {
			return "unchanged", err
		}
		return "renamed to " + r.Name, nil
	}, carmy.Write, carmy.Name("rename_account"), carmy.Timeout(time.Hour), carmy.Register(false))
	reg, err := carmy.New().Tool(rename).Build()
	if err != nil {
		panic(err)
	}
	defer reg.Close()
	ctx := context.Background()

	task, err := reg.Start(ctx, carmy.Call{Tool: "rename_account", Input: json.RawMessage(`{}`), Principal: "alice"})
	if err != nil {
		panic(err)
	}
	// Read the task until it asks (a client polls, or waits with GET
	// /tasks/{id}?wait= over HTTP).
	for task.Status != carmy.TaskInputRequired {
		time.Sleep(time.Millisecond)
		if task, err = reg.Task(ctx, task.ID, carmy.WithPrincipal("alice")); err != nil {
			panic(err)
		}
	}
	q := task.Questions[0]
	fmt.Println(task.Status, q.ID, q.Message)
	fmt.Println(string(q.Schema))

	if err := task.Answer(ctx, q.ID, carmy.TaskAnswer{Action: "accept", Content: Rename{Name: "Acme"}}); err != nil {
		panic(err)
	}
	res, err := task.Wait(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(task.Status, string(res.Output))
	// Output:
	// input_required rename What should the account be called?
	// {"properties":{"name":{"minLength":1,"type":"string"}},"required":["name"],"type":"object"}
	// completed "renamed to Acme"
}
