// Package parts declares a type whose rule is silenced at its field, for
// the tools of every package that reach it: package silenced learns of the
// directive from the analysis of this package.
package parts

type Part struct {
	Code string `json:"code" validate:"alpha" jsonschema:"description=Letters only"` //carmy:ignore rule described
}
