package carmy

import (
	"encoding/json"
	"fmt"

	"github.com/carmy-dev/carmy/internal/search"
)

// searchToolName is the name of the tool that [Builder.ToolSearch] adds.
const searchToolName = "search_tools"

// searchDefaultLimit is how many tools a search returns when its caller
// does not say.
const searchDefaultLimit = 5

// ToolSearch adds the tool search_tools ([searchToolName]), with which a
// model finds the tools it may call by what they do instead of reading
// every tool's definition: it ranks the registry's tools for a query
// (BM25 over their names, descriptions, input field names and field
// descriptions) and returns the best, each with its input schema, so that
// the model can call it next. A caller finds only the tools it may list
// ([Registry.ToolsFor]): the same permissions and policies decide both.
//
// search_tools reads, may run in parallel and takes {"query": "...",
// "limit": 5}: a query of 1 to 512 characters, and at most 1 to 50 tools
// (5 when left out). It answers
//
//	{"tools": [{"name", "description", "effect", "confirmation", "task_support", "input_schema"}]}
//
// best first; confirmation is "required" when a call needs a person's
// approval, "possible" when it may, "none" otherwise. A tool of the
// builder's named search_tools is a Build error. carmy.toml's
// tool_search = true turns it on too.
func (b *Builder) ToolSearch() *Builder {
	b.toolSearch = true
	return b
}

// searchInput is what search_tools takes.
type searchInput struct {
	Query string `json:"query" validate:"required,max=512" jsonschema:"description=What the tool should do\\, in a few words (cancel an order\\, export invoices as CSV)"`
	Limit *int   `json:"limit,omitempty" validate:"omitempty,min=1,max=50" jsonschema:"description=How many tools to return at most,default=5"`
}

// searchOutput is what search_tools answers.
type searchOutput struct {
	Tools []searchHit `json:"tools" jsonschema:"description=The tools found\\, best first"`
}

// searchHit is one tool found: enough to call it.
type searchHit struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Effect       Effect          `json:"effect"`
	Confirmation string          `json:"confirmation" jsonschema:"enum=required,enum=possible,enum=none,description=Whether a call needs a person's approval"`
	TaskSupport  TaskSupport     `json:"task_support"`
	InputSchema  json.RawMessage `json:"input_schema"`
}

// searchDescription is search_tools' description, for the model.
const searchDescription = "Find the tools you may call for a task, by what they do: describe the task in a few words " +
	"(\"cancel an order\", \"export invoices as CSV\"). Returns the best tools first, each with its name, description, " +
	"effect, whether a call needs a person's approval (confirmation), whether it runs as a task, and its input schema; " +
	"call a tool it returns by that name. Search again with other words when none fits."

// toolIndex is the search index of a registry's tools, with the tools in
// the index's order.
type toolIndex struct {
	ix    *search.Index
	tools []*tool
}

// addSearchTool adds search_tools to r when the builder asks for it;
// sites are the declarations of the builder's tools, by name.
func (b *Builder) addSearchTool(r *Registry, sites map[string]string) []error {
	if !b.toolSearch {
		return nil
	}
	if site, taken := sites[searchToolName]; taken {
		return []error{&BuildError{Tool: searchToolName, Site: site, Err: fmt.Errorf("has the name of the tool that Builder.ToolSearch adds; give it another Name, or leave tool search off")}}
	}
	t, problems := b.prepare(Tool(r.searchTools, Read, Name(searchToolName), Description(searchDescription), ParallelSafe(), Register(false)))
	if len(problems) > 0 {
		errs := make([]error, len(problems))
		for i, p := range problems {
			errs[i] = &BuildError{Tool: searchToolName, Err: p}
		}
		return errs
	}
	b.setLimits(t)
	if len(t.meta.Requires) > 0 {
		r.requiring.Store(true)
	}
	r.tab().tools[searchToolName] = t
	r.tab().names = append(r.tab().names, searchToolName)
	r.searchIndex.Store(&toolIndex{})
	return nil
}

// reindex builds the search index from the registry's tools: once Build
// has them all, and again whenever a mount's upstream adds or changes a
// tool. A mounted tool its upstream drops or holds stays in the index, and
// searches skip it as every list does (visibility asks whether it is
// live). Searches read the index through an atomic pointer. It does
// nothing for a registry without search_tools.
func (r *Registry) reindex() {
	if r.searchIndex.Load() == nil {
		return
	}
	tab := r.tab()
	ti := &toolIndex{tools: make([]*tool, 0, len(tab.names))}
	docs := make([]search.Doc, 0, len(tab.names))
	for _, name := range tab.names {
		if name == searchToolName {
			continue // a model that calls it has found it
		}
		t := tab.tools[name]
		ti.tools = append(ti.tools, t)
		docs = append(docs, search.Doc{Name: t.meta.Name, Description: t.meta.Description, InputSchema: t.meta.InputSchema})
	}
	ti.ix = search.New(docs)
	r.searchIndex.Store(ti)
}

// searchTools is search_tools: the index ranks, and each tool is checked,
// best first, against what the caller may list, until the limit is met.
func (r *Registry) searchTools(ctx Context, in searchInput) (searchOutput, error) {
	limit := searchDefaultLimit
	if in.Limit != nil {
		limit = *in.Limit
	}
	id := Identity{Principal: ctx.Principal, Session: ctx.Session, Permissions: ctx.Permissions.List(), Metadata: ctx.Metadata}
	visible := r.visibility(ctx, id)
	out := searchOutput{Tools: []searchHit{}}
	ti := r.searchIndex.Load()
	if ti.ix == nil {
		return out, nil
	}
	ti.ix.Search(in.Query, func(d int) bool {
		t := ti.tools[d]
		if !visible(t) {
			return true
		}
		out.Tools = append(out.Tools, searchHit{
			Name:         t.meta.Name,
			Description:  t.meta.Description,
			Effect:       t.meta.Effect,
			Confirmation: r.confirmationFor(t).String(),
			TaskSupport:  t.meta.Tasks,
			InputSchema:  t.meta.InputSchema,
		})
		return len(out.Tools) < limit
	})
	return out, nil
}

// deferTools marks the tools carmy.toml's deferred_tools names as
// [Deferred]; a name of no tool is a Build error.
func (b *Builder) deferTools(r *Registry) []error {
	var errs []error
	for _, name := range b.deferred.Values {
		t, ok := r.tab().tools[name]
		if !ok {
			errs = append(errs, &BuildError{Site: b.deferred.Site, Err: fmt.Errorf("deferred_tools: there is no tool named %q", name)})
			continue
		}
		t.meta.Deferred = true
	}
	return errs
}
