// Package model holds types that the tools of package main reach: their
// comments are read from here.
package model

// Address is where an order goes.
type Address struct {
	// Street and number.
	Street string `json:"street"`
	City   string `json:"city"` // City, in the local spelling.
	// Country code, ISO 3166-1 alpha-2.
	//
	//nolint:lll // a directive is not part of the description
	Country string `json:"country"`
}

// Unreached is a documented type no tool reaches; it stays out of the
// generated file.
type Unreached struct {
	// Nothing reads this.
	X int
}
