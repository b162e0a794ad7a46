// Package shared declares a type whose rules are reported where tools of
// other packages use it.
package shared

type Shared struct {
	Code string `json:"code" validate:"alpha"`
}
