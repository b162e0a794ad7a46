package policy

import (
	"strconv"
	"strings"
)

// cedarType writes t as a Cedar schema type; false for a type the schema
// cannot declare (any value, a map of any keys), which is left out: its
// values are read through input_json.
func cedarType(b *strings.Builder, t *typ, indent string) bool {
	switch t.kind {
	case kindString:
		b.WriteString("String")
	case kindLong:
		b.WriteString("Long")
	case kindDecimal:
		b.WriteString("decimal")
	case kindBool:
		b.WriteString("Bool")
	case kindSet:
		var items strings.Builder
		if !cedarType(&items, t.items, indent) {
			return false
		}
		b.WriteString("Set<" + items.String() + ">")
	case kindRecord:
		recordType(b, t.attrs, indent)
	default:
		return false
	}
	return true
}

// recordType writes a record type of the attributes that have a Cedar
// type; an attribute that may be absent is optional.
func recordType(b *strings.Builder, attrs []attr, indent string) {
	var lines []string
	for _, a := range attrs {
		var at strings.Builder
		if !cedarType(&at, a.t, indent+"\t") {
			continue
		}
		opt := "?"
		if a.required {
			opt = ""
		}
		lines = append(lines, indent+"\t"+strconv.Quote(a.name)+opt+": "+at.String())
	}
	if len(lines) == 0 {
		b.WriteString("{}")
		return
	}
	b.WriteString("{\n" + strings.Join(lines, ",\n") + "\n" + indent + "}")
}

// cedarSchema is the Cedar schema of one tool: the entities and actions
// every tool shares, with the tool's input as the input of call and
// approve.
func cedarSchema(in *typ) string {
	var input strings.Builder
	if in.kind == kindRecord {
		recordType(&input, in.attrs, "\t\t")
	} else {
		input.WriteString("{}")
	}
	return `// A caller: its permissions, and its identity's metadata as tags.
entity Principal {
	permissions: Set<String>
} tags String;

// A tool: its effect, the permissions it requires, the server it is
// mounted from ("" for a tool of this registry).
entity Tool {
	effect: String,
	requires: Set<String>,
	server: String
};

// Whether a caller sees the tool in a list or a search.
action list appliesTo {
	principal: Principal,
	resource: Tool,
	context: {
		door: String
	}
};

// Whether a caller may call the tool with this input.
action call appliesTo {
	principal: Principal,
	resource: Tool,
	context: {
		input: ` + input.String() + `,
		input_json: String,
		door: String,
		task: Bool
	}
};

// Whether a person may decide an approval of a call of the tool.
action approve appliesTo {
	principal: Principal,
	resource: Tool,
	context: {
		requester: Principal,
		input: ` + input.String() + `,
		input_json: String,
		door: String
	}
};
`
}
