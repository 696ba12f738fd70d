package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/edge"
)

// decideRequest is the body of /v1/decide, /v1/peek and /v1/record.
type decideRequest struct {
	Policy     string            `json:"policy"`
	Attributes map[string]string `json:"attributes"`

	// Cost is nil when absent, which means 1 (costOf).
	Cost *int64 `json:"cost"`
}

// costOf is the cost of a request whose cost field is cost: 1 when absent.
func costOf(cost *int64) int64 {
	if cost == nil {
		return 1
	}
	return *cost
}

// readBody reads r's body, at most max bytes; a longer body is a 413
// problem.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, *httplimit.Problem) {
	return readBodyInto(w, r, max, nil)
}

// readBodyInto reads r's body, at most max bytes, appending it to buf; a
// longer body is a 413 problem.
func readBodyInto(w http.ResponseWriter, r *http.Request, max int64, buf []byte) ([]byte, *httplimit.Problem) {
	buf, err := readCapped(w, r, max, buf)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return buf, &httplimit.Problem{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
				Detail: fmt.Sprintf("the request body is larger than %d bytes", tooBig.Limit)}
		}
		return buf, badRequest("malformed_json", "reading the request body: %v", err)
	}
	return buf, nil
}

// readCapped appends r's body to buf, as io.ReadAll reads it, but for its
// first max bytes: a longer body fails with an *http.MaxBytesError. Room
// for a body of a declared length that fits is made at once.
func readCapped(w http.ResponseWriter, r *http.Request, max int64, buf []byte) ([]byte, error) {
	if n := r.ContentLength; n > 0 && n <= max {
		buf = slices.Grow(buf, int(n)+1) // +1: the read that finds the end
	}
	body := http.MaxBytesReader(w, r.Body, max)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// readJSON reads r's body, size-capped at max, into a T (see decodeJSON).
func readJSON[T any](w http.ResponseWriter, r *http.Request, max int64, example string) (T, *httplimit.Problem) {
	var v T
	body, p := readBody(w, r, max)
	if p == nil {
		p = decodeJSON(body, &v, example)
	}
	return v, p
}

// decodeJSON decodes one JSON object from body into v, strictly: unknown
// fields, wrong types, trailing data, an empty body and text that is not
// UTF-8 are 400 problems that say what to fix. example is a valid body,
// quoted in messages.
func decodeJSON(body []byte, v any, example string) *httplimit.Problem {
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
	if off := invalidText(body); off >= 0 {
		return textProblem(body, off)
	}
	return nil
}

func jsonProblem(err error, example string) *httplimit.Problem {
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

// parseDecide decodes a decide request body and checks that it names a
// policy; the edge checks the rest. The hand decoder of decide_request.go
// decodes it, and decodeJSON says what is wrong with a body it rejects.
func parseDecide(body []byte) (*decideRequest, *httplimit.Problem) {
	sc := &decideScratch{attrs: make(map[string]string)}
	return sc.parse(body)
}

// invalidText returns the offset in the JSON text body of the first byte
// that encoding/json would decode as U+FFFD without saying so, making
// different values one ("\xff" and "\xfe" the same user): a byte that is
// not valid UTF-8, or a \u escape of half a surrogate pair. It returns -1
// when there is none.
func invalidText(body []byte) int {
	end := len(body)
	if !utf8.Valid(body) {
		for i := 0; i < len(body); {
			r, n := utf8.DecodeRune(body[i:])
			if r == utf8.RuneError && n == 1 {
				end = i
				break
			}
			i += n
		}
	}
	for i := 0; i < end; i++ {
		j := bytes.IndexByte(body[i:end], '\\')
		if j < 0 {
			break
		}
		i += j
		if i+1 >= end || body[i+1] != 'u' {
			i++ // an escaped character: skip it, a backslash among them
			continue
		}
		r := hex4(body, i+2)
		if !utf16.IsSurrogate(r) {
			i += 5
			continue
		}
		if r < 0xdc00 && i+7 < len(body) && body[i+6] == '\\' && body[i+7] == 'u' {
			if lo := hex4(body, i+8); 0xdc00 <= lo && lo < 0xe000 {
				i += 11
				continue
			}
		}
		return i
	}
	if end < len(body) {
		return end
	}
	return -1
}

// hex4 is the value of the four hexadecimal digits at b[i:], or -1.
func hex4(b []byte, i int) rune {
	if i+4 > len(b) {
		return -1
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return -1
		}
	}
	return r
}

// textProblem is the problem of a body whose text is not UTF-8 at off:
// invalid_attribute when off is in the name or value of one of its
// attributes, malformed_json otherwise.
func textProblem(body []byte, off int) *httplimit.Problem {
	if name, ok := attributeAt(body, off); ok {
		return inputProblem(edge.InvalidAttribute(name))
	}
	return badRequest("malformed_json", "the request body is not UTF-8 text at byte %d (a byte that is not UTF-8, or an escape of half a surrogate pair); send JSON text in UTF-8", off)
}

// attributeAt returns the attribute of the "attributes" object of the JSON
// object body whose name or value holds the byte at off.
func attributeAt(body []byte, off int) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	for dec.More() {
		field, err := dec.Token()
		if err != nil {
			return "", false
		}
		if f, _ := field.(string); !strings.EqualFold(f, "attributes") {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return "", false
			}
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return "", false
		}
		for dec.More() {
			from := dec.InputOffset()
			name, err := dec.Token()
			if err != nil {
				return "", false
			}
			if _, err := dec.Token(); err != nil {
				return "", false
			}
			if from <= int64(off) && int64(off) < dec.InputOffset() {
				s, _ := name.(string)
				return s, true
			}
		}
		if _, err := dec.Token(); err != nil {
			return "", false
		}
	}
	return "", false
}
