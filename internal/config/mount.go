package config

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Mount is one [[mount]] of carmy.toml: a third-party MCP server whose
// tools join the registry.
type Mount struct {
	Prefix           string
	Command          []string
	URL              string
	Headers          map[string]string // ${VAR} expanded
	Env              map[string]string // ${VAR} expanded
	Roots            []string
	Requires         []string // permissions for every tool, resource and prompt of the mount
	Sampling         bool
	URLElicitation   bool
	Resources        *bool // nil: the default
	Prompts          *bool
	EffectFloor      string // "" for none; an effect's name, checked here
	TrustAnnotations *bool
	Deferred         bool                 // every tool of the mount is loaded on demand
	Tools            map[string]MountTool // [mount.tools.<upstream name>]
	Site             string               // "carmy.toml:7"
}

// MountTool is one [mount.tools.<name>] override.
type MountTool struct {
	Effect      string
	Requires    []string
	RateLimit   Rate // Calls 0: none
	Confirm     *bool
	Timeout     time.Duration
	Description string
	Deferred    *bool // nil: as the mount says
}

var (
	mountKeys     = []string{"prefix", "command", "url", "headers", "env", "roots", "requires", "sampling", "url_elicitation", "resources", "prompts", "effect_floor", "trust_annotations", "deferred", "tools"}
	mountToolKeys = []string{"effect", "requires", "rate_limit", "confirm", "timeout", "description", "deferred"}
	envReference  = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
	// mountLines finds the header of each [[mount]], for its line.
	mountLines = regexp.MustCompile(`(?m)^[ \t]*\[\[[ \t]*mount[ \t]*\]\]`)
)

// parseMounts checks the [[mount]] array of tables.
func parseMounts(d *document, path string, fail func(line int, format string, args ...any)) []Mount {
	v := d.value("mount")
	if v == nil {
		return nil
	}
	line := d.line("mount")
	tables, ok := v.([]map[string]any)
	if !ok {
		fail(line, "mount must be an array of tables: [[mount]] with prefix and command or url, not %s", tomlValue(v))
		return nil
	}
	lines := mountLines.FindAllStringIndex(d.src, -1)
	var mounts []Mount
	for i, t := range tables {
		at := line
		if i < len(lines) {
			at = 1 + strings.Count(d.src[:lines[i][0]], "\n")
		}
		m := Mount{Site: fmt.Sprintf("%s:%d", path, at)}
		bad := func(format string, args ...any) {
			fail(at, "[[mount]] %d: "+format, append([]any{i + 1}, args...)...)
		}
		for _, k := range slices.Sorted(maps.Keys(t)) {
			if !slices.Contains(mountKeys, k) {
				bad("unknown key %q; a mount has %s", k, strings.Join(mountKeys, ", "))
			}
		}
		str := func(key string) string {
			s, ok := t[key].(string)
			if _, set := t[key]; set && !ok {
				bad("%s must be a string, not %s", key, tomlValue(t[key]))
			}
			return s
		}
		flag := func(key string) *bool {
			x, set := t[key]
			if !set {
				return nil
			}
			b, ok := x.(bool)
			if !ok {
				bad("%s must be true or false, not %s", key, tomlValue(x))
				return nil
			}
			return &b
		}
		strs := func(key string) []string {
			x, set := t[key]
			if !set {
				return nil
			}
			items, ok := x.([]any)
			var out []string
			for _, it := range items {
				s, isString := it.(string)
				ok = ok && isString
				out = append(out, s)
			}
			if !ok {
				bad("%s must be a list of strings, not %s", key, tomlValue(x))
				return nil
			}
			return out
		}
		table := func(key string) map[string]string {
			x, set := t[key]
			if !set {
				return nil
			}
			tm, ok := x.(map[string]any)
			if !ok {
				bad("%s must be a table of strings, not %s", key, tomlValue(x))
				return nil
			}
			out := map[string]string{}
			for k, val := range tm {
				s, ok := val.(string)
				if !ok {
					bad("%s.%s must be a string, not %s", key, k, tomlValue(val))
					continue
				}
				expanded, err := expandEnv(s)
				if err != nil {
					bad("%s.%s: %v", key, k, err)
					continue
				}
				out[k] = expanded
			}
			return out
		}
		m.Prefix = str("prefix")
		m.Command = strs("command")
		m.URL = str("url")
		m.Headers = table("headers")
		m.Env = table("env")
		m.Roots = strs("roots")
		m.Requires = strs("requires")
		m.Sampling = flag("sampling") != nil && *flag("sampling")
		m.URLElicitation = flag("url_elicitation") != nil && *flag("url_elicitation")
		m.Resources, m.Prompts = flag("resources"), flag("prompts")
		m.TrustAnnotations = flag("trust_annotations")
		m.Deferred = flag("deferred") != nil && *flag("deferred")
		if m.EffectFloor = str("effect_floor"); m.EffectFloor != "" && !slices.Contains(effectNames, m.EffectFloor) {
			bad("effect_floor %q is not an effect; use one of %s", m.EffectFloor, strings.Join(effectNames, ", "))
		}
		if _, set := t["prefix"]; !set {
			bad(`needs a prefix (lower-case letters and digits; "" for a single mount)`)
		}
		if (len(m.Command) == 0) == (m.URL == "") {
			bad(`needs command (a list such as ["npx", "server"]) or url, one of them`)
		}
		m.Tools = parseMountTools(t["tools"], bad)
		mounts = append(mounts, m)
	}
	return mounts
}

// parseMountTools checks the overrides of a mount's tools.
func parseMountTools(v any, bad func(format string, args ...any)) map[string]MountTool {
	if v == nil {
		return nil
	}
	tables, ok := v.(map[string]any)
	if !ok {
		bad("tools must be tables [mount.tools.<upstream tool name>], not %s", tomlValue(v))
		return nil
	}
	out := map[string]MountTool{}
	for _, name := range slices.Sorted(maps.Keys(tables)) {
		t, ok := tables[name].(map[string]any)
		if !ok {
			bad("tools.%s must be a table, not %s", name, tomlValue(tables[name]))
			continue
		}
		var o MountTool
		for _, k := range slices.Sorted(maps.Keys(t)) {
			x := t[k]
			wrong := func(want string) { bad("tools.%s.%s must be %s, not %s", name, k, want, tomlValue(x)) }
			switch k {
			case "effect", "description", "rate_limit", "timeout":
				s, isString := x.(string)
				if !isString {
					wrong("a string")
					continue
				}
				var err error
				switch k {
				case "effect":
					if o.Effect = s; !slices.Contains(effectNames, s) {
						bad("tools.%s.effect %q is not an effect; use one of %s", name, s, strings.Join(effectNames, ", "))
					}
				case "description":
					o.Description = s
				case "rate_limit":
					if o.RateLimit.Calls, o.RateLimit.Per, err = parseRate(s); err != nil {
						bad("tools.%s.rate_limit: %v", name, err)
					}
					o.RateLimit.Key = "mount.tools." + name + ".rate_limit"
				case "timeout":
					if o.Timeout, err = parseDuration(s); err != nil {
						bad("tools.%s.timeout: %v", name, err)
					}
				}
			case "confirm", "deferred":
				b, isBool := x.(bool)
				if !isBool {
					wrong("true or false")
					continue
				}
				if k == "confirm" {
					o.Confirm = &b
				} else {
					o.Deferred = &b
				}
			case "requires":
				items, isList := x.([]any)
				for _, it := range items {
					s, isString := it.(string)
					isList = isList && isString
					o.Requires = append(o.Requires, s)
				}
				if !isList {
					wrong("a list of permissions")
				}
			default:
				bad("tools.%s has an unknown key %q; an override has %s", name, k, strings.Join(mountToolKeys, ", "))
			}
		}
		out[name] = o
	}
	return out
}

// expandEnv replaces each ${VAR} in s with the variable's value; a
// variable that is not set is a mistake, never an empty credential.
func expandEnv(s string) (string, error) {
	var missing []string
	out := envReference.ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[2 : len(ref)-1]
		v, ok := os.LookupEnv(name)
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("names ${%s}, which is not set", strings.Join(missing, "}, ${"))
	}
	return out, nil
}
