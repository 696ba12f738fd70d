package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/front"
)

// A batch is the body of /v1/decide, /v1/peek or /v1/record that is a JSON
// array of requests instead of one: the requests are decided one after
// another, in order, each on its own and atomically, as if each had been
// sent alone; the answer is 200 with an array of their answers in the same
// order, each {"status":200,"decision":{…}} or {"status":400,"problem":{…}}
// with the status and problem the request alone would have been answered
// with. A later request's failure undoes nothing of an earlier one. The
// whole batch is answered with one problem only when it is not a JSON array
// of objects (malformed_json), holds more than Options.MaxBatch requests
// (batch_too_large) or is too large a body (body_too_large).

const batchExample = `[{"policy":"notify","attributes":{"category":"errors"}},{"policy":"notify","attributes":{"category":"info"},"cost":2}]`

// IsBatch reports whether body is a batch: its first byte after JSON
// whitespace is '['.
func IsBatch(body []byte) bool {
	for _, c := range body {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c == '['
	}
	return false
}

// Batch returns the requests of the batch in sc.Body, or the problem that
// says why it is not a JSON array of objects.
func (sc *Scratch) Batch() ([][]byte, *httplimit.Problem) {
	items, ok := splitBatch(sc.Body, sc.items[:0])
	sc.items = items
	if ok {
		return items, nil
	}
	return batchItems(sc.Body)
}

// splitBatch appends to items each element of the JSON array body, which
// must be an object, and reports whether body is such an array: valid JSON,
// one value, its elements objects. It rejects some arrays batchItems
// accepts (nesting deeper than 100), never one it rejects.
func splitBatch(body []byte, items [][]byte) ([][]byte, bool) {
	d := lexer{b: body}
	d.space()
	if !d.next('[') {
		return items, false
	}
	d.space()
	if !d.next(']') {
		for {
			start := d.i
			if d.i >= len(d.b) || d.b[d.i] != '{' || !d.skip(0) {
				return items, false
			}
			items = append(items, body[start:d.i])
			d.space()
			if d.next(']') {
				break
			}
			if !d.next(',') {
				return items, false
			}
			d.space()
		}
	}
	d.space()
	return items, d.i == len(body)
}

// batchItems decodes the batch body with encoding/json: its elements, or
// the problem that says why body is not a JSON array of objects.
func batchItems(body []byte) ([][]byte, *httplimit.Problem) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var raw []json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		var syntax *json.SyntaxError
		switch {
		case errors.As(err, &syntax):
			return nil, front.BadRequest("malformed_json", "the request body is not valid JSON (at byte %d: %v); send a request such as %s, or an array of them such as %s", syntax.Offset, syntax, front.DecideExample, batchExample)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return nil, front.BadRequest("malformed_json", "the request body ends in the middle of a JSON value; send an array of requests such as %s", batchExample)
		}
		return nil, front.BadRequest("malformed_json", "the request body is not valid JSON (%v); send an array of requests such as %s", err, batchExample)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, front.BadRequest("malformed_json", "the request body holds more than one JSON value; send one array of requests such as %s", batchExample)
	}
	items := make([][]byte, len(raw))
	for i, m := range raw {
		if m[0] != '{' {
			return nil, front.BadRequest("malformed_json", "request %d of the batch must be a JSON object such as %s, not %s", i, front.DecideExample, jsonValueKind(m[0]))
		}
		items[i] = m
	}
	return items, nil
}

// jsonValueKind names the kind of the JSON value that starts with c, as
// encoding/json's type errors do.
func jsonValueKind(c byte) string {
	switch c {
	case '"':
		return "string"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}
