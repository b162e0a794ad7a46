package carmy

import "encoding/json"

// recordError is the form in which an error is recorded for replay: the
// error as callers receive it, without its cause.
func recordError(e *Error) []byte {
	public := *e
	public.Err = nil
	data, err := json.Marshal(&public)
	if err != nil {
		// Details that do not encode are dropped rather than the record, so
		// that the request id still runs once.
		public.Details = nil
		data, _ = json.Marshal(&public)
	}
	return data
}

// replayError decodes a recorded error; each replay gets its own copy.
func replayError(data []byte) *Error {
	e := new(Error)
	if err := json.Unmarshal(data, e); err != nil {
		return &Error{Code: CodeInternal, Message: "the recorded outcome of this request id cannot be read", Retryable: true, Err: err}
	}
	return e
}
