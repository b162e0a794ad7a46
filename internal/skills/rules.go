package skills

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// RulesPath is where a server serves the skill that teaches its rules:
// skill://carmy/tool-rules/SKILL.md. The prefix keeps it apart from the
// host's own skills, which a folder's top level holds.
const RulesPath = "carmy/tool-rules"

// rulesDescription is the generated skill's description, the line a host
// shows a model among its skills.
const rulesDescription = "How to call this server's tools safely: which need a person's approval and how to wait for it, rate limits and how to back off, tools that run as tasks, and request ids that make retries safe. Read it before calling a tool that changes something."

// Rules is what a server's generated skill says to one caller.
type Rules struct {
	// Tools are the tools the caller may list, by name.
	Tools []Tool
	// RequestIDMeta is the _meta key of a call's request id.
	RequestIDMeta string
	// ApprovalTimeout is how long a person's approval is waited for.
	ApprovalTimeout time.Duration
}

// Tool is one tool as the rules describe it.
type Tool struct {
	Name string
	// Effect is none, read, write, external_write or destructive.
	Effect     string
	Idempotent bool
	// Confirmation is required, possible or none: whether a call waits
	// for a person.
	Confirmation string
	// Tasks is forbidden, optional or required.
	Tasks string
	// Rate says the rate limit in words ("3 times per minute"), "" for
	// none; MaxInFlight is how many calls may run at once, 0 for any.
	Rate        string
	MaxInFlight int
	Timeout     time.Duration
}

// changes reports whether a call of t may change something.
func (t Tool) changes() bool { return t.Effect != "none" && t.Effect != "read" }

// Generate writes the skill of r at [RulesPath].
func Generate(r Rules) *Skill {
	name := RulesPath[strings.LastIndexByte(RulesPath, '/')+1:]
	front, _ := json.Marshal(struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	}{name, rulesDescription})
	return &Skill{Path: RulesPath, Name: name, Description: rulesDescription, Frontmatter: front,
		Files: []*File{newFile(RulesPath, Manifest, []byte(r.markdown(name)))}}
}

// markdown is the SKILL.md of r.
func (r Rules) markdown(name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "---\nname: %s\ndescription: %q\n---\n\n", name, rulesDescription)
	b.WriteString("# Calling this server's tools\n\n")
	b.WriteString("This server wrote these rules for you from its tools as you may use them now: " +
		"they name only the tools you may call. A refusal is a tool result whose error has a `code`, " +
		"a `message` that says what to do, `retryable`, and `details`; follow the message.\n\n")
	if len(r.Tools) == 0 {
		b.WriteString("You may call none of this server's tools now.\n")
		return b.String()
	}

	var changing, approval, limited, tasks []Tool
	for _, t := range r.Tools {
		if t.changes() && !t.Idempotent {
			changing = append(changing, t)
		}
		if t.Confirmation == "required" || t.Confirmation == "possible" {
			approval = append(approval, t)
		}
		if t.Rate != "" || t.MaxInFlight > 0 {
			limited = append(limited, t)
		}
		if t.Tasks == "required" {
			tasks = append(tasks, t)
		}
	}

	b.WriteString("## Request ids: retry without doing anything twice\n\n")
	fmt.Fprintf(&b, "Give every call that changes something a request id: a new unique string (a UUID) in the call's `_meta` as `%s`. "+
		"If the answer is lost (a timeout, a dropped connection, `unavailable`, `outcome_unknown`), call again with the same request id and the same input: "+
		"the tool runs once, and a repeat gets the first call's outcome again, marked `carmy/replayed`. "+
		"Never reuse a request id for another input (that is refused with `conflict`), and never send a new one for a retry: a new id is a new action.\n\n", r.RequestIDMeta)
	if len(changing) > 0 {
		fmt.Fprintf(&b, "These tools change something and are not idempotent: %s.\n\n", names(changing))
	}

	b.WriteString("## Tools that need a person\n\n")
	if len(approval) == 0 {
		b.WriteString("None of your tools needs a person's approval.\n\n")
	} else {
		for _, t := range approval {
			if t.Confirmation == "required" {
				fmt.Fprintf(&b, "- `%s` needs a person's approval of each input.\n", t.Name)
			} else {
				fmt.Fprintf(&b, "- `%s` may need a person's approval, depending on its input.\n", t.Name)
			}
		}
		fmt.Fprintf(&b, "\nWhen your client can show the person a form or a page, the call asks them and waits for their answer (up to %s); "+
			"run as a task, the task waits in `input_required` and its status message names where to decide. "+
			"Otherwise the call is refused with `confirmation_required`: tell the user what its message says, wait until they say they decided, "+
			"then call again with the same input and the same request id. "+
			"A person's refusal is `permission_denied` (`details.reason` \"declined\"): do not ask again. Never try to approve a call yourself.\n\n", duration(r.ApprovalTimeout))
	}

	b.WriteString("## Limits: back off\n\n")
	if len(limited) == 0 {
		b.WriteString("None of your tools has a rate limit. A call refused with a retryable `unavailable` may be sent again after a short wait, with the same request id.\n\n")
	} else {
		for _, t := range limited {
			var parts []string
			if t.Rate != "" {
				parts = append(parts, t.Rate)
			}
			if t.MaxInFlight > 0 {
				parts = append(parts, fmt.Sprintf("%d at once", t.MaxInFlight))
			}
			fmt.Fprintf(&b, "- `%s`: %s.\n", t.Name, strings.Join(parts, ", "))
		}
		b.WriteString("\nA call past a limit is refused with `rate_limited` before it runs. Wait `details.retry_after_ms` (the message says it in seconds) " +
			"before calling that tool again, with the same request id; do not call it again sooner.\n\n")
	}

	b.WriteString("## Tasks\n\n")
	if len(tasks) == 0 {
		b.WriteString("None of your tools runs only as a task. A tool that supports tasks may still answer a call with a task when your client declares the tasks extension: poll it with `tasks/get` at the interval it gives until it is completed, failed or cancelled.\n\n")
	} else {
		fmt.Fprintf(&b, "These tools run only as tasks: %s. Your client must declare the tasks extension (`io.modelcontextprotocol/tasks`) to call them. "+
			"A call answers at once with a task: poll it with `tasks/get` at the interval it gives until it is completed, failed or cancelled; "+
			"a task in `input_required` waits for an answer or a person. Send the task's request id once: polling never runs the tool again.\n\n", names(tasks))
	}

	b.WriteString("## Your tools\n\n| tool | effect | needs a person | task | limits | deadline |\n|---|---|---|---|---|---|\n")
	for _, t := range r.Tools {
		lim := t.Rate
		if t.MaxInFlight > 0 {
			lim = strings.TrimPrefix(lim+fmt.Sprintf(", %d at once", t.MaxInFlight), ", ")
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", t.Name, t.Effect, or(t.Confirmation, "none"), or(t.Tasks, "optional"), or(lim, "none"), duration(t.Timeout))
	}
	return b.String()
}

// names lists tools' names in backticks.
func names(ts []Tool) string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = "`" + t.Name + "`"
	}
	return strings.Join(out, ", ")
}

// duration says d in the largest whole unit, "none" for 0.
func duration(d time.Duration) string {
	switch {
	case d <= 0:
		return "none"
	case d%time.Hour == 0:
		return plural(int(d/time.Hour), "hour")
	case d%time.Minute == 0:
		return plural(int(d/time.Minute), "minute")
	case d%time.Second == 0:
		return plural(int(d/time.Second), "second")
	}
	return d.String()
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
