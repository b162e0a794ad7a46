// Package price is reached by the tools of package good only through
// package model: good does not import it.
package price

// Price of a thing, in cents.
type Price struct {
	// Cents, never negative.
	Cents int `json:"cents" validate:"min=0"`
}
