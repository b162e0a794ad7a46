package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/carmy-dev/carmy"
	"github.com/carmy-dev/carmy/internal/httpapi"
)

const tasksUsage = `usage: carmy tasks [flags] URL [get ID | wait ID | cancel ID | answer ID QUESTION ANSWER]

carmy tasks shows the tasks of the caller (the token's holder) on a running
carmy server: calls started with carmy call -async (or Prefer:
respond-async), which outlive their request.

  carmy tasks URL             list the caller's tasks, newest first
  carmy tasks URL get ID      print one task, with the questions its tool
                              waits for
  carmy tasks URL wait ID     wait until it ends and print its outcome as
                              carmy call does (exit status 1 for an error)
  carmy tasks URL cancel ID   cancel it and print it as it stopped; a task
                              that already ended is not changed (exit 1)
  carmy tasks URL answer ID QUESTION ANSWER
                              answer the task's question QUESTION: ANSWER
                              is the form's fields as a JSON object, or
                              decline or cancel; print the task

A task is its principal's alone: another caller's id is not found. -json
prints the server's answers as they came.

Flags:
`

// question is a question a task's tool waits for, as the task object
// holds it: MCP's inputRequests, by id.
type question struct {
	Params struct {
		Message         string          `json:"message"`
		RequestedSchema json.RawMessage `json:"requestedSchema"`
	} `json:"params"`
}

// questionsOf are the questions task t waits for, by id.
func questionsOf(t *httpapi.Task) map[string]question {
	var qs map[string]question
	if len(t.Questions) > 0 && json.Unmarshal(t.Questions, &qs) != nil {
		return nil
	}
	return qs
}

// taskWait is how long one GET of carmy tasks wait holds the request: the
// server's bound.
const taskWait = "60s"

func runTasks(args []string, stdout, stderr io.Writer) int {
	var cf clientFlags
	fs, pos, code, done := parseClient("carmy tasks", tasksUsage, &cf, stdout, stderr, args, nil)
	if done {
		return code
	}
	verb := "list"
	switch {
	case len(pos) == 1:
	case len(pos) == 3 && (pos[1] == "get" || pos[1] == "wait" || pos[1] == "cancel"):
		verb = pos[1]
	case len(pos) == 5 && pos[1] == "answer":
		verb = pos[1]
	default:
		fmt.Fprintf(stderr, "carmy tasks: want URL, or URL get|wait|cancel ID, or URL answer ID QUESTION ANSWER; got %q\n", pos)
		fs.Usage()
		return 2
	}
	var answer []byte
	if verb == "answer" {
		var err error
		if answer, err = taskAnswer(pos[3], pos[4]); err != nil {
			fmt.Fprintf(stderr, "carmy tasks: %v\n", err)
			return 2
		}
	}
	elems := []string{"tasks"}
	if verb != "list" {
		elems = append(elems, pos[2])
	}
	switch verb {
	case "cancel":
		elems = append(elems, "cancel")
	case "answer":
		elems = append(elems, "input")
	}
	endpoint, err := endpointURL(pos[0], elems...)
	if err != nil {
		fmt.Fprintf(stderr, "carmy tasks: %v\n", err)
		return 2
	}
	ctx, stop := cf.context()
	defer stop()
	method, header := http.MethodGet, http.Header(nil)
	if verb == "cancel" || verb == "answer" {
		method, header = http.MethodPost, http.Header{"Content-Type": {"application/json"}}
	}
	// wait reads the task at once first, to tell how to answer the
	// questions it waits for (told), then waits for each change.
	read, told := false, false
	for {
		target := endpoint
		if verb == "wait" && read {
			target += "?wait=" + url.QueryEscape(taskWait)
		}
		read = true
		status, body, err := cf.do(ctx, method, target, header, answer)
		if err != nil {
			fmt.Fprintf(stderr, "carmy tasks: %v\n", err)
			return 1
		}
		if status != http.StatusOK {
			if cf.json {
				stdout.Write(withNewline(body))
			} else {
				printFailure(stderr, "carmy tasks", status, body)
				cf.authHint(stderr, status)
			}
			return 1
		}
		if verb == "list" {
			return printTaskList(stdout, stderr, body, cf.json)
		}
		var t httpapi.Task
		if err := json.Unmarshal(body, &t); err != nil {
			fmt.Fprintf(stderr, "carmy tasks: the server's answer is not a task: %v\n", err)
			return 1
		}
		if verb == "wait" && !carmy.TaskStatus(t.Status).Final() {
			if qs := questionsOf(&t); len(qs) > 0 && !told {
				// Nothing moves until someone answers: say how, once.
				told = true
				fmt.Fprintf(stderr, "(task %s waits for answers to %s: see carmy tasks %s get %s, then answer with carmy tasks %s answer %s QUESTION ANSWER)\n",
					t.ID, strings.Join(slices.Sorted(maps.Keys(qs)), ", "), pos[0], t.ID, pos[0], t.ID)
			}
			continue // the server held the request as long as it may
		}
		if cf.json {
			stdout.Write(withNewline(body))
		} else if verb == "wait" {
			return printOutcome(stdout, stderr, &t)
		} else {
			printTask(stdout, &t)
		}
		if verb == "wait" && carmy.TaskStatus(t.Status) != carmy.TaskCompleted {
			return 1
		}
		return 0
	}
}

// printTaskList writes a page of tasks as a table.
func printTaskList(stdout, stderr io.Writer, body []byte, raw bool) int {
	if raw {
		stdout.Write(withNewline(body))
		return 0
	}
	var page httpapi.TaskPage
	if err := json.Unmarshal(body, &page); err != nil {
		fmt.Fprintf(stderr, "carmy tasks: the server's answer is not a list of tasks: %v\n", err)
		return 1
	}
	if len(page.Tasks) == 0 {
		fmt.Fprintln(stdout, "This caller has no tasks on the server.")
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTOOL\tSTATUS\tPROGRESS\tUPDATED")
	for _, t := range page.Tasks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.Tool, t.Status, progressText(&t), t.UpdatedAt.Local().Format(time.DateTime))
	}
	tw.Flush()
	if page.NextCursor != "" {
		fmt.Fprintln(stderr, "(older tasks not shown)")
	}
	return 0
}

// progressText is a task's progress in a few words.
func progressText(t *httpapi.Task) string {
	p := t.Progress
	switch {
	case p == nil:
		return "-"
	case p.Total > 0:
		return fmt.Sprintf("%g/%g", p.Done, p.Total)
	}
	return fmt.Sprintf("%g", p.Done)
}

// printTask writes one task for a person.
func printTask(w io.Writer, t *httpapi.Task) {
	fmt.Fprintf(w, "task %s: %s %s\n", t.ID, t.Tool, t.Status)
	if t.Progress != nil {
		fmt.Fprintf(w, "  progress: %s %s\n", progressText(t), t.Progress.Message)
	}
	if t.ApprovalID != "" {
		fmt.Fprintf(w, "  waits for a person to approve %s", t.ApprovalID)
		if t.ApprovalURL != "" {
			fmt.Fprintf(w, " at %s", t.ApprovalURL)
		}
		fmt.Fprintln(w)
	}
	qs := questionsOf(t)
	for _, id := range slices.Sorted(maps.Keys(qs)) {
		q := qs[id].Params
		fmt.Fprintf(w, "  asks %s: %s\n", id, q.Message)
		if len(q.RequestedSchema) > 0 {
			fmt.Fprintf(w, "    form: %s\n", q.RequestedSchema)
		}
	}
	if t.Error != nil {
		fmt.Fprintf(w, "  error: %s: %s\n", t.Error.Code, t.Error.Message)
	}
	if len(t.Output) > 0 {
		fmt.Fprintf(w, "  output: %s\n", indented(json.RawMessage(t.Output), "  "))
	}
}

// taskAnswer is the body of POST /tasks/{id}/input that answers question
// with answer: the form's fields as a JSON object, or decline or cancel.
func taskAnswer(question, answer string) ([]byte, error) {
	a := map[string]any{"action": "accept"}
	switch answer {
	case "decline", "cancel":
		a["action"] = answer
	default:
		var fields map[string]any
		if err := json.Unmarshal([]byte(answer), &fields); err != nil || fields == nil {
			return nil, fmt.Errorf("the answer must be the form's fields as a JSON object, or decline or cancel; got %q", answer)
		}
		a["content"] = json.RawMessage(answer)
	}
	return json.Marshal(map[string]any{question: a})
}

// printOutcome writes a finished task's outcome as carmy call writes a
// call's.
func printOutcome(stdout, stderr io.Writer, t *httpapi.Task) int {
	if carmy.TaskStatus(t.Status) == carmy.TaskCompleted {
		stdout.Write(withNewline(indented(json.RawMessage(t.Output), "")))
		return 0
	}
	if t.Error == nil {
		fmt.Fprintf(stderr, "carmy tasks: task %s is %s, without an error\n", t.ID, t.Status)
		return 1
	}
	printError(stderr, t.Error)
	return 1
}

// indented indents JSON, or returns it as it came when it is not JSON.
func indented(raw json.RawMessage, prefix string) []byte {
	var out bytes.Buffer
	if len(raw) == 0 || json.Indent(&out, raw, prefix, "  ") != nil {
		return raw
	}
	return out.Bytes()
}

// printStarted writes the task a call started, with how to follow it.
func printStarted(stdout, stderr io.Writer, base string, body []byte) int {
	var t httpapi.Task
	if err := json.Unmarshal(body, &t); err != nil || t.ID == "" {
		fmt.Fprintf(stderr, "carmy call: the server's answer is not a task: %s\n", strings.TrimSpace(string(body)))
		return 1
	}
	printTask(stdout, &t)
	fmt.Fprintf(stderr, "(follow it with: carmy tasks %s wait %s)\n", base, t.ID)
	return 0
}
