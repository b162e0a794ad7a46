package config

import (
	"fmt"
	"maps"
	"slices"
)

// EffectPermissions is the [effect_permissions] table: the permission a
// call needs by its tool's effect, as the root package's
// Builder.EffectPermissions takes it, keyed by the effect's name.
type EffectPermissions struct {
	ByEffect map[string]string // "read" → "tools:read"; nil when the table is absent
	Site     string            // file:line of the table
}

// effectNames are the keys [effect_permissions] takes.
var effectNames = []string{"none", "read", "write", "external_write", "destructive"}

// parseEffectPermissions checks the [effect_permissions] table: effect
// names and string values. Whether a value is a valid permission is the
// builder's to say, at Build.
func parseEffectPermissions(d *document, path string, fail func(line int, format string, args ...any)) EffectPermissions {
	v := d.value("effect_permissions")
	if v == nil {
		return EffectPermissions{}
	}
	line := d.line("effect_permissions")
	m, isTable := v.(map[string]any)
	if !isTable {
		fail(line, "effect_permissions must be a table such as [effect_permissions] with read = \"tools:read\", not %s", tomlValue(v))
		return EffectPermissions{}
	}
	out := EffectPermissions{ByEffect: map[string]string{}, Site: fmt.Sprintf("%s:%d", path, line)}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s, isString := m[k].(string)
		switch {
		case !slices.Contains(effectNames, k):
			fail(line, "unknown key %q; [effect_permissions] has none, read, write, external_write and destructive", "effect_permissions."+k)
		case !isString:
			fail(line, "effect_permissions.%s must be a permission such as \"tools:%s\", not %s", k, k, tomlValue(m[k]))
		default:
			out.ByEffect[k] = s
		}
	}
	return out
}
