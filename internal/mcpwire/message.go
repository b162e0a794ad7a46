package mcpwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// ReadMessage reads an MCP message sent over HTTP and checks it strictly.
// On failure it returns the HTTP status and the JSON-RPC error to answer.
func ReadMessage(body io.Reader, limit int64) ([]byte, int, *jsonrpc.Error) {
	b, err := io.ReadAll(body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, http.StatusRequestEntityTooLarge, TooLargeError(limit)
		}
		return nil, http.StatusBadRequest, &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: "Parse error: the message could not be read"}
	}
	if e := CheckMessage(b); e != nil {
		return nil, http.StatusBadRequest, e
	}
	return b, 0, nil
}

// CheckMessage checks that a message is one JSON value and nothing else:
// valid UTF-8, and no object with a member name twice, which the SDK would
// read as its last occurrence where another reader may take the first.
func CheckMessage(msg []byte) *jsonrpc.Error {
	dec := jsontext.NewDecoder(bytes.NewReader(msg))
	_, err := dec.ReadValue()
	if err == nil {
		if _, err = dec.ReadToken(); err == io.EOF {
			return nil
		}
		if err == nil {
			err = errors.New("data after the message")
		}
	}
	if err == io.EOF {
		err = errors.New("the message is empty")
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: "Parse error: " + strings.TrimPrefix(err.Error(), "jsontext: ")}
}

// TooLargeError is the answer to a message larger than limit bytes.
func TooLargeError(limit int64) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: fmt.Sprintf("Parse error: the message is larger than the limit of %d bytes", limit)}
}

// OrphanError is a JSON-RPC error that belongs to no request, whose id
// JSON-RPC wants null (the SDK's encoder would leave it out).
func OrphanError(e *jsonrpc.Error) []byte {
	b, _ := json.Marshal(struct {
		JSONRPC string         `json:"jsonrpc"`
		ID      *struct{}      `json:"id"`
		Error   *jsonrpc.Error `json:"error"`
	}{"2.0", nil, e})
	return b
}

// WriteRPCError answers an HTTP request with an error that belongs to no
// request.
func WriteRPCError(w http.ResponseWriter, status int, e *jsonrpc.Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(OrphanError(e))
}
