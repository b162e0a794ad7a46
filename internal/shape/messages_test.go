package shape

import (
	"reflect"
	"strings"
	"testing"
)

// TestRuleMessage: rules the validator checks at call time read as a
// person would say them, by the kind of value they apply to.
func TestRuleMessage(t *testing.T) {
	tests := []struct {
		tag  string
		kind reflect.Kind
		want string
	}{
		{"ne=0", reflect.Int, "must not be 0"},
		{"ne=0", reflect.Float64, "must not be 0"},
		{"eq=3", reflect.Uint8, "must be 3"},
		{"ne=admin", reflect.String, `must not be "admin"`},
		{"eq=yes", reflect.String, `must be "yes"`},
		{"ne=1", reflect.Slice, "must not have exactly 1 item"},
		{"eq=2", reflect.Map, "must have exactly 2 members"},
		{"eq=true", reflect.Bool, "must be true"},
		{"min=3", reflect.Slice, "must have at least 3 items"},
		{"max=1", reflect.String, "must have at most 1 character"},
		{"len=16", reflect.Slice, "must have exactly 16 items"},
		{"gt=0", reflect.Int64, "must be greater than 0"},
		{"lt=2", reflect.Map, "must have fewer than 2 members"},
		{"oneof=red green", reflect.String, `must be one of "red", "green"`},
		{"oneof=1 2", reflect.Int, "must be one of 1, 2"},
		{"alphanum", reflect.String, "must contain only ASCII letters and digits"},
		{"startswith=ord_", reflect.String, `must start with "ord_"`},
		{"len=2|len=4", reflect.String, "must have exactly 2 characters, or must have exactly 4 characters"},
		{"lowercase|uppercase", reflect.String, "must be lowercase, or must be uppercase"},
		{"eqfield=Password", reflect.String, "must equal field Password"},
		{"unique", reflect.Slice, "must not contain duplicates"},
		{"datetime=2006-01-02", reflect.String, `must be a date or time in Go's layout "2006-01-02"`},
		{"no_such_rule=3", reflect.String, "must satisfy the rule no_such_rule=3"},
	}
	for _, tt := range tests {
		t.Run(tt.tag+"/"+tt.kind.String(), func(t *testing.T) {
			if got := RuleMessage(tt.tag, tt.kind); got != tt.want {
				t.Errorf("RuleMessage(%q, %s) = %q, want %q", tt.tag, tt.kind, got, tt.want)
			}
		})
	}
}

// TestRuleMessageCoversValidator: every rule the validator knows reads as
// words, not as "must satisfy the rule".
func TestRuleMessageCoversValidator(t *testing.T) {
	known := []string{"required", "isdefault", "len", "min", "max", "eq", "ne", "lt", "lte", "gt", "gte",
		"eq_ignore_case", "ne_ignore_case", "alpha", "alphanum", "alphaunicode", "alphanumunicode", "boolean",
		"numeric", "number", "hexadecimal", "hexcolor", "rgb", "rgba", "hsl", "hsla", "e164", "email", "url",
		"http_url", "uri", "base64", "contains", "containsany", "containsrune", "excludes", "excludesall",
		"excludesrune", "startswith", "endswith", "startsnotwith", "endsnotwith", "uuid", "uuid4", "ulid",
		"ascii", "printascii", "multibyte", "latitude", "longitude", "ipv4", "ipv6", "ip", "cidr", "mac",
		"hostname", "fqdn", "unique", "oneof", "oneofci", "noneof", "json", "jwt", "lowercase", "uppercase",
		"datetime", "timezone", "iso3166_1_alpha2", "iso4217", "semver", "cron", "url_encoded", "html"}
	for _, name := range known {
		if m := RuleMessage(name+"=x", reflect.String); strings.Contains(m, "satisfy the rule") {
			t.Errorf("%s: %q", name, m)
		}
	}
}

type omitemptyIssue struct {
	Category *string          `json:"category,omitempty" validate:"omitempty,oneof=a b"`
	Note     *string          `json:"note" validate:"omitempty,min=3"`
	Count    *int             `json:"count,omitempty" validate:"omitempty,min=1"`
	Tags     []string         `json:"tags,omitempty" validate:"omitempty,min=2,dive,oneof=x y z"`
	Labels   map[string]int   `json:"labels,omitempty" validate:"omitempty,min=1"`
	Runtime  *int             `json:"runtime,omitempty" validate:"omitempty,ne=0"`
	Elems    []*string        `json:"elems,omitempty" validate:"dive,omitempty,len=2"`
	Deep     map[string][]int `json:"deep,omitempty" validate:"dive,omitempty,min=1"`
}

// TestOmitemptyPointersAndCollections: after omitempty, a nil pointer and
// an absent slice or map skip the rules, as the validator does; a non-nil
// pointer ("" and 0 included) and a present slice or map ([] and {}
// included) keep them.
func TestOmitemptyPointersAndCollections(t *testing.T) {
	tests := []struct {
		name, input string
		want        string // the problems, path: message; "" for none
	}{
		{"absent", `{}`, ""},
		{"null pointers", `{"category":null,"note":null,"count":null,"runtime":null}`, ""},
		{"empty string behind a pointer", `{"category":""}`, `category: must be one of "a", "b"`},
		{"short string behind a pointer", `{"note":""}`, "note: must have at least 3 characters, not 0"},
		{"zero behind a pointer", `{"count":0}`, "count: must be at least 1"},
		{"a run-time rule behind a pointer", `{"runtime":0}`, "runtime: must not be 0"},
		{"empty slice", `{"tags":[]}`, "tags: must have at least 2 items, not 0"},
		{"empty map", `{"labels":{}}`, "labels: must not be empty"},
		{"null element", `{"elems":[null,"ab"]}`, ""},
		{"empty element behind a pointer", `{"elems":[""]}`, "elems[0]: must have at least 2 characters, not 0"},
		{"empty slice element", `{"deep":{"a":[]}}`, "deep.a: must not be empty"},
		{"valid", `{"category":"a","note":"abc","count":1,"tags":["x","y"],"labels":{"a":1},"runtime":2,"elems":["ab"],"deep":{"a":[1]}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, problems := run[omitemptyIssue](t, tt.input)
			var got []string
			for _, p := range problems {
				got = append(got, p.Path+": "+p.Message)
			}
			if strings.Join(got, "; ") != tt.want {
				t.Errorf("problems %q, want %q", got, tt.want)
			}
		})
	}
}

// TestInSchemaAgreesWithTheModel: the rules InSchema names are those the
// model maps into the schema, and the others stay with the validator.
func TestInSchemaAgreesWithTheModel(t *testing.T) {
	tests := []struct {
		rule string
		typ  reflect.Type
	}{
		{"required", reflect.TypeFor[string]()},
		{"min=1", reflect.TypeFor[string]()},
		{"max=1", reflect.TypeFor[int]()},
		{"len=1", reflect.TypeFor[[]int]()},
		{"gt=1", reflect.TypeFor[map[string]int]()},
		{"gte=1", reflect.TypeFor[float64]()},
		{"lt=1", reflect.TypeFor[int8]()},
		{"lte=1", reflect.TypeFor[string]()},
		{"oneof=a b", reflect.TypeFor[string]()},
		{"email", reflect.TypeFor[string]()},
		{"ne=0", reflect.TypeFor[int]()},
		{"eq=a", reflect.TypeFor[string]()},
		{"alphanum", reflect.TypeFor[string]()},
		{"startswith=x", reflect.TypeFor[string]()},
		{"unique", reflect.TypeFor[[]int]()},
		{"lowercase", reflect.TypeFor[string]()},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			st := reflect.StructOf([]reflect.StructField{{Name: "F", Type: tt.typ, Tag: reflect.StructTag(`json:"f" validate:"` + tt.rule + `"`)}})
			n, err := Of(st)
			if err != nil {
				t.Fatal(err)
			}
			f := n.Fields[0]
			name, _, _ := strings.Cut(tt.rule, "=")
			stated := !f.Rules.empty() || f.Rules.Format != "" || f.Required && name == "required"
			if stated != InSchema(name) {
				t.Errorf("the model states %s in the schema: %v; InSchema says %v (run-time tag %q)", tt.rule, stated, InSchema(name), f.Runtime)
			}
		})
	}
}
