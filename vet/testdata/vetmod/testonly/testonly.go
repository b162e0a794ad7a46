package testonly
