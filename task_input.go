package carmy

// TaskAfterInput makes a tool that runs as a task ask its questions before
// its task starts, where the protocol lets a call do both: over MCP's
// sessionless protocol (2026-07-28), a call from a client that takes tasks
// runs first as a call, whose questions ([Context.Elicit]) go back in
// input-required rounds, and the round that brings their answers starts
// the task, the answers with it. A tool with this option asks before it
// works: a first round that asks nothing runs to its end as a call, even
// of a [TaskRequired] tool. Questions asked once the task runs wait for
// the task's input (tasks/update), as any task's do.
//
// Everywhere else (a session, HTTP, Go) it changes nothing: the call is a
// task from the start, as its [Tasks] mode says. With [TaskForbidden] it
// is a mistake that [Builder.Build] reports.
func TaskAfterInput() Option {
	return optionFunc(func(o *options) {
		if o.record("TaskAfterInput", true) {
			o.taskAfterInput = true
		}
	})
}
