package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// decideRequest is the body of /v1/decide, /v1/peek and /v1/record.
type decideRequest struct {
	Policy     string            `json:"policy"`
	Attributes map[string]string `json:"attributes"`

	// Cost is nil when absent, which means 1.
	Cost *int64 `json:"cost"`
}

// cost returns the request's cost: 1 when absent.
func (r *decideRequest) cost() int64 {
	if r.Cost == nil {
		return 1
	}
	return *r.Cost
}

// readBody reads r's body, at most max bytes; a longer body is a 413
// problem.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, *problem) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &problem{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
				Detail: fmt.Sprintf("the request body is larger than %d bytes", tooBig.Limit)}
		}
		return nil, badRequest("malformed_json", "reading the request body: %v", err)
	}
	return body, nil
}

// readJSON reads r's body, size-capped at max, into a T (see decodeJSON).
func readJSON[T any](w http.ResponseWriter, r *http.Request, max int64, example string) (T, *problem) {
	var v T
	body, p := readBody(w, r, max)
	if p == nil {
		p = decodeJSON(body, &v, example)
	}
	return v, p
}

// decodeJSON decodes one JSON object from body into v, strictly: unknown
// fields, wrong types, trailing data and an empty body are 400 problems
// that say what to fix. example is a valid body, quoted in messages.
func decodeJSON(body []byte, v any, example string) *problem {
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("malformed_json", "the request body is empty; send a JSON object such as %s", example)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonProblem(err, example)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("malformed_json", "the request body holds more than one JSON value; send one object such as %s", example)
	}
	return nil
}

func jsonProblem(err error, example string) *problem {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return badRequest("malformed_json", "the request body is not valid JSON (at byte %d: %v); send an object such as %s", syntax.Offset, syntax, example)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return badRequest("malformed_json", "the request body must be a JSON object such as %s, not %s", example, typ.Value)
		}
		return badRequest("malformed_json", "field %q must be %s, not %s; send an object such as %s", typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value, example)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("malformed_json", "the request body ends in the middle of a JSON value; send an object such as %s", example)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest("malformed_json", "%s; the fields are those of %s", strings.TrimPrefix(err.Error(), "json: "), example)
	}
	return badRequest("malformed_json", "the request body is not valid JSON (%v); send an object such as %s", err, example)
}

// jsonKind names a Go kind the way a JSON user would.
func jsonKind(k string) string {
	switch k {
	case "int64", "int", "uint64":
		return "a whole number"
	case "string":
		return "a string"
	case "map":
		return "an object of string values"
	case "struct", "ptr":
		return "an object"
	}
	return k
}

const (
	decideExample  = `{"policy":"notify","attributes":{"category":"errors"},"cost":1}`
	reserveExample = `{"schedule":"carrier","attributes":{"carrier":"45"},"cost":1}`
	cancelExample  = `{"schedule":"carrier","attributes":{"carrier":"45"},"id":"…"}`
)

// parseDecide decodes and checks a decide request body.
func parseDecide(body []byte) (*decideRequest, *problem) {
	var req decideRequest
	if p := decodeJSON(body, &req, decideExample); p != nil {
		return nil, p
	}
	if req.Policy == "" {
		return nil, badRequest("bad_request", "the request names no policy; send an object such as %s", decideExample)
	}
	if c := req.cost(); c < 1 {
		return nil, badRequest("invalid_cost", "cost is %d; a cost must be at least 1 (leave it out for 1)", c)
	}
	return &req, nil
}
