// Package carmy turns plain, typed Go functions into tools that AI agents
// can call safely.
//
// A tool is a function, an effect and options:
//
//	// CreateOrder is the input of create_order.
//	type CreateOrder struct {
//		SKU      string `json:"sku" validate:"required"`
//		Quantity uint32 `json:"quantity" validate:"min=1,max=100"`
//	}
//
//	var createOrderTool = carmy.Tool(createOrder, carmy.Write,
//		carmy.Description("Place an order"))
//
//	func createOrder(ctx carmy.Context, orders carmy.State[*Orders], in CreateOrder) (Order, error) {
//		return orders.Value.Place(ctx, in)
//	}
//
// A [Builder] collects tools and their dependencies and builds a [Registry]
// once, reporting every problem at once; the registry then runs calls:
//
//	reg, err := carmy.New().Tool(createOrderTool).State(orders).Build()
//	order, err := carmy.Invoke[Order](ctx, reg, "create_order", CreateOrder{SKU: "A-1", Quantity: 2})
//
// # Schemas
//
// carmy derives a JSON Schema for every input and output from the Go types:
// json tags name the members, a field is required unless it is a pointer or
// has omitempty or omitzero, pointers are nullable, sized integers carry
// their range, and validate rules that JSON Schema can say (required, min,
// max, len, gt, gte, lt, lte, oneof, email, url, uuid, dive for elements,
// and each after omitempty) become keywords. time.Duration travels as a
// string in Go's syntax ("1h30m"); a type with its own MarshalJSON,
// UnmarshalJSON and JSONSchema method is published and checked as it
// declares. The runtime decodes strictly and enforces the same model, so an
// input is accepted exactly when it conforms to the published schema and to
// the validator rules that JSON Schema cannot say; outputs are written by
// that model, so they conform to their published schemas too.
//
// # Effects
//
// Every tool declares an [Effect]: [None], [Read], [Write], [ExternalWrite]
// or [Destructive]. It is published to agents (as MCP annotations) and
// available to the host's policy.
//
// # Errors
//
// Callers see [*Error] values with a [Code]. invalid_input carries a
// [FieldError] per problem, with paths such as items[2].sku, so a model can
// fix its call. A tool chooses its code by returning an [*Error]; any other
// error becomes internal, and its text is logged, never sent.
//
// # Serving
//
// [Registry.Handler] serves the HTTP API (GET /tools, POST /tools/{name}),
// MCP over streamable HTTP at /mcp (the session-based protocol versions and
// the sessionless 2026-07-28 side by side), the approvals and the console;
// [Builder.RunStdio] serves MCP to local clients. [App] and [Builder.Run]
// add carmy.toml, CARMY_* variables, bearer tokens or [OAuth], and graceful
// shutdown; identity and permissions always come from the host's
// [Authenticator], never from the request.
//
// Every route guards the same boundary: a request on a loopback address
// must name the server by a loopback name or one of [Builder.AllowHosts];
// pages of other origins are refused unless [Builder.AllowOrigins] lets
// them in; bodies are bounded by [Builder.BodyLimit] and must arrive in
// time; an MCP session is its principal's alone. A request id is 1 to 255
// printable ASCII characters, on every transport.
//
// # Permissions
//
// A tool declared with [Requires] runs only for callers holding every
// permission named, and [Builder.EffectPermissions] adds a permission per
// effect (for example tools:read and tools:write); [ToolMetadata.Requires]
// lists both. A caller that lacks one is refused with permission_denied,
// naming what is missing, before its input is read, through every door;
// every list it gets (GET /tools, MCP tools/list, the console, the LLM
// exports made for it) leaves the tool out, as it leaves out what
// [Builder.Authorize] refuses ([Registry.ToolsFor]). With [OAuth], the
// permissions are the token's scopes: the protected resource metadata
// lists them, and a call of the HTTP API that lacks one answers 403 with
// error="insufficient_scope" and the scopes to ask for.
//
// # Search
//
// With many tools, a model does better finding the few it needs than
// reading every definition. [Builder.ToolSearch] adds the tool
// search_tools, which ranks the tools a caller may list for a query in
// words and answers the best with their input schemas; [Deferred] marks a
// tool a model should load on demand, which the LLM exports and MCP
// tools/list say with defer_loading. docs/search.md in the repository
// says when to use which.
//
// # Policies
//
// Rules that change without a deploy, and rules over arguments, are Cedar
// policies ([Builder.PolicyFile], [Builder.Policies]): who may list, call
// and approve which tool, with which input. With a set installed, a call
// no policy permits is refused; a forbid's @reason is the message, a
// permit's @confirm asks a person's approval, and every refusal is
// permission_denied naming the policies in details.policy:
//
//	@id("large-transfers")
//	@reason("transfers above 1,000 need the treasury team")
//	forbid(principal, action == Action::"call", resource == Tool::"transfer")
//	unless { context.input has amount && context.input.amount.lessThanOrEqual(decimal("1000.0")) };
//
// Policies only tighten what the code declares: none lifts a [Requires],
// a limit or a [RequireConfirmation]. A changed file is reloaded once it
// is stable; a bad one leaves the set in force. See docs/policies.md.
//
// # Confirmation and approvals
//
// A tool with [RequireConfirmation] runs only for a caller holding
// confirm:<name>, or confirm:<name>:<digest> for one exact input. Otherwise
// the call is refused with confirmation_required and a pending approval
// that a person holding approve:<name> (or, on a local server without
// authentication, the holder of the console link printed at start) can
// approve or deny at /console or /approvals; the approved call then runs
// once.
//
// # Tasks
//
// A call can outlive its request: [Registry.Start] (over HTTP, a call sent
// with Prefer: respond-async) runs it as a [Task], which its principal
// reads back by id, on any host sharing the store ([Registry.Task],
// GET /tasks/{id}), waits for and cancels. A call that waits for a
// person's approval is the task's input_required, for as long as the
// approval lives. [Tasks] says whether a tool's calls may run as tasks;
// [TaskAfterInput] has a tool's questions asked before its task starts,
// where MCP lets a call do both.
//
// # Skills
//
// [Builder.Skills] serves the skills a host ships (directories that each
// hold a SKILL.md, with their files) over MCP's skills extension:
// skills/list and skills/get give each skill's front matter and every
// file's sha256 digest and size, and resources/read gives the files at
// skill://<directory>/<file>. carmy adds skill://carmy/tool-rules/SKILL.md,
// written for each caller from the tools that caller may list: which need
// a person and how to wait, limits and how to back off, tasks, and request
// ids for safe retries. Build refuses a bad folder, naming the file.
//
// # Mounting
//
// [Builder.Mount] puts a third-party MCP server's tools into the registry,
// named <prefix>_<name>: a stdio server run as a child ([Command]) or a
// streamable HTTP one ([Endpoint]); carmy.toml's [[mount]] tables do the
// same, and `carmy proxy` serves them without Go. A mounted tool is a tool
// like any other: its input is checked against the upstream's own schema
// before anything is sent, the upstream receives the canonical form a
// person approved and the request id in _meta, a replay never reaches it,
// and permissions, limits, serialization, tasks and audit apply. Its
// effect comes from the upstream's hints, safe by default (no hint is
// [Destructive], which needs a person's confirmation); [EffectFloor],
// [TrustAnnotations] and [MountTool] overrides change it. An upstream's
// own tool error is [CodeToolError]; a call sent whose answer was lost is
// recorded as unavailable with details.reason "outcome_unknown". Its
// questions reach the caller's person through [Context.ElicitSchema],
// labelled with the mount. The registry follows an upstream's changes
// while it serves: a tool added or redefined upstream is served at once,
// under the policies in force, its effect never lower than it was, and no
// approval of an old definition authorizes a call of a new one.
//
// # Concurrency
//
// A [Registry] is safe for concurrent use, and immutable but for the
// tools its mounted upstreams add or change. A tool without
// [ParallelSafe] never has two executions at once; calls wait their turn,
// at most the tool's timeout (then unavailable, retryable), and the wait
// respects the caller's cancellation.
//
// # Cancellation
//
// Every execution runs under a deadline: the tool's [Timeout], else the
// builder's default. The caller gets timeout or cancelled as soon as the
// deadline passes or it gives up, even if the tool ignores its context;
// the tool's context is cancelled and its serialization turn is released
// only when its code returns.
//
// # Other packages
//
// This package is the contract for tool authors and hosts. Package
// github.com/carmy-dev/carmy/store is for those who implement the
// idempotency store and locker that [Builder.Store], [Builder.Locker] and
// [Builder.StoreURL] take (its in-memory ones are the defaults), as
// database/sql/driver is beside database/sql. Package
// github.com/carmy-dev/carmy/llm turns a registry's tools into the tool
// definitions of LLM provider APIs and runs a model's tool calls. The
// modules github.com/carmy-dev/carmy/otelcarmy (OpenTelemetry tracing and
// metrics, as middleware) and github.com/carmy-dev/carmy/pgaudit (audit
// records in PostgreSQL, for [Builder.AuditURL]) keep their dependencies
// out of this one.
package carmy
