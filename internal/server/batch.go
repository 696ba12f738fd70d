package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/edge"
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

// DefaultMaxBatch is Options.MaxBatch's default.
const DefaultMaxBatch = 1000

const batchExample = `[{"policy":"notify","attributes":{"category":"errors"}},{"policy":"notify","attributes":{"category":"info"},"cost":2}]`

// isBatch reports whether body is a batch: its first byte after JSON
// whitespace is '['.
func isBatch(body []byte) bool {
	for _, c := range body {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c == '['
	}
	return false
}

// decideBatch answers the batch body.
func (s *Server) decideBatch(w http.ResponseWriter, r *http.Request, st *state, op edge.Op, api string, sc *decideScratch) {
	items, ok := splitBatch(sc.body, sc.items[:0])
	sc.items = items
	if !ok {
		var p *httplimit.Problem
		if items, p = batchItems(sc.body); p != nil {
			s.failDecide(w, api, p, sc)
			return
		}
	}
	if len(items) > s.batch {
		s.failDecide(w, api, &httplimit.Problem{Status: http.StatusBadRequest, Code: "batch_too_large",
			Detail: fmt.Sprintf("the batch holds %d requests, more than the %d one call may decide; send them in several batches", len(items), s.batch)}, sc)
		return
	}
	out := append(sc.out[:0], '[')
	for i, item := range items {
		if i > 0 {
			out = append(out, ',')
		}
		req, p := sc.parse(item)
		var o edge.Outcome
		if p == nil {
			o = st.policies.DecideAttrs(r.Context(), req.Policy, req.Attributes, call(api, op, costOf(req.Cost)))
			s.counted(op, &o)
			p = outcomeProblem(&o)
		}
		if p != nil {
			s.metrics.requests.WithLabelValues(api, strconv.Itoa(p.Status)).Inc()
			out = append(out, `{"status":`...)
			out = strconv.AppendInt(out, int64(p.Status), 10)
			out = append(out, `,"problem":`...)
			out = appendProblem(out, p)
			out = append(out, '}')
			continue
		}
		s.metrics.requests.WithLabelValues(api, "200").Inc()
		out = append(out, `{"status":200,"decision":`...)
		out = appendDecision(out, &o.Decisions()[0])
		out = append(out, '}')
	}
	sc.out = append(out, "]\n"...)
	writeDecision(w, sc.out)
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

// maxSkipDepth is how deeply splitBatch follows nested values.
const maxSkipDepth = 100

// skip reads one JSON value of any kind, at nesting depth depth.
func (d *lexer) skip(depth int) bool {
	if d.i >= len(d.b) || depth > maxSkipDepth {
		return false
	}
	switch c := d.b[d.i]; {
	case c == '{', c == '[':
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		d.i++
		d.space()
		if d.next(end) {
			return true
		}
		for {
			if c == '{' {
				if !d.skipString() {
					return false
				}
				d.space()
				if !d.next(':') {
					return false
				}
				d.space()
			}
			if !d.skip(depth + 1) {
				return false
			}
			d.space()
			if d.next(end) {
				return true
			}
			if !d.next(',') {
				return false
			}
			d.space()
		}
	case c == '"':
		return d.skipString()
	case c == '-' || '0' <= c && c <= '9':
		return d.skipNumber()
	case c == 'n':
		return d.null()
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	}
	return false
}

// literal reads lit if it is next.
func (d *lexer) literal(lit string) bool {
	if len(d.b)-d.i >= len(lit) && string(d.b[d.i:d.i+len(lit)]) == lit {
		d.i += len(lit)
		return true
	}
	return false
}

// skipString reads a JSON string without decoding it. Like encoding/json's
// scanner it takes any byte from 0x20 on as it is; str is the reader that
// checks the text.
func (d *lexer) skipString() bool {
	if !d.next('"') {
		return false
	}
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			d.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if d.i+1 >= len(d.b) {
				return false
			}
			switch d.b[d.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i += 2
			case 'u':
				if hex4(d.b, d.i+2) < 0 {
					return false
				}
				d.i += 6
			default:
				return false
			}
		default:
			d.i++
		}
	}
	return false
}

// skipNumber reads a JSON number.
func (d *lexer) skipNumber() bool {
	d.next('-')
	digits := func() int {
		start := d.i
		for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
			d.i++
		}
		return d.i - start
	}
	start := d.i
	if n := digits(); n == 0 || n > 1 && d.b[start] == '0' {
		return false
	}
	if d.next('.') && digits() == 0 {
		return false
	}
	if d.next('e') || d.next('E') {
		if !d.next('+') {
			d.next('-')
		}
		if digits() == 0 {
			return false
		}
	}
	return true
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
			return nil, badRequest("malformed_json", "the request body is not valid JSON (at byte %d: %v); send a request such as %s, or an array of them such as %s", syntax.Offset, syntax, decideExample, batchExample)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return nil, badRequest("malformed_json", "the request body ends in the middle of a JSON value; send an array of requests such as %s", batchExample)
		}
		return nil, badRequest("malformed_json", "the request body is not valid JSON (%v); send an array of requests such as %s", err, batchExample)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, badRequest("malformed_json", "the request body holds more than one JSON value; send one array of requests such as %s", batchExample)
	}
	items := make([][]byte, len(raw))
	for i, m := range raw {
		if m[0] != '{' {
			return nil, badRequest("malformed_json", "request %d of the batch must be a JSON object such as %s, not %s", i, decideExample, jsonValueKind(m[0]))
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
