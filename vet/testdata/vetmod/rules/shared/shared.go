// Package shared declares a type whose rules are reported where tools of
// other packages use it, unless a directive at the field silences them.
package shared

type Shared struct {
	Code  string `json:"code" validate:"alpha"`
	Quiet string `json:"quiet" validate:"alphanum"` //carmy:ignore rule silenced here, for every tool that uses it
}
