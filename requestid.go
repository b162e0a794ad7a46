package carmy

import "fmt"

// maxRequestIDLen is the longest request id a call may carry. A request id
// is kept in the idempotency store and in logs; the bound keeps a caller
// from storing megabytes under one.
const maxRequestIDLen = 255

// requestIDRule is the rule a request id keeps, as refusals state it.
const requestIDRule = "a request id is 1 to 255 printable ASCII characters (! to ~)"

// checkRequestID refuses a request id that is not 1 to 255 bytes of
// printable ASCII, '!' to '~': no spaces, no control characters, nothing a
// log line or a store key could be confused by. "" means the call has no
// request id and is allowed.
func checkRequestID(id string) *Error {
	if id == "" {
		return nil
	}
	var why string
	if len(id) > maxRequestIDLen {
		why = fmt.Sprintf("this one is %d bytes long", len(id))
	} else {
		for i := 0; i < len(id); i++ {
			if c := id[i]; c < '!' || c > '~' {
				why = fmt.Sprintf("byte %d of this one is %#02x", i, c)
				break
			}
		}
	}
	if why == "" {
		return nil
	}
	return &Error{Code: CodeInvalidInput, Message: "invalid request id: " + requestIDRule + "; " + why}
}
