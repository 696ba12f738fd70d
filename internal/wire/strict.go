package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/edge"
	"github.com/sluicerate/sluice/internal/front"
)

// The library fallback of the decide request's hand decoder, and the
// decoder of every other JSON body of the API: encoding/json, strictly,
// with problems that say what to fix.

// ReadJSON reads r's body, at most max bytes (front.ReadBody), into a T
// (see DecodeJSON).
func ReadJSON[T any](w http.ResponseWriter, r *http.Request, max int64, example string) (T, *httplimit.Problem) {
	var v T
	body, p := front.ReadBody(w, r, max, nil)
	if p == nil {
		p = DecodeJSON(body, &v, example)
	}
	return v, p
}

// DecodeJSON decodes one JSON object from body into v, strictly: unknown
// fields, wrong types, trailing data, an empty body and text that is not
// UTF-8 are 400 problems that say what to fix. example is a valid body,
// quoted in messages.
func DecodeJSON(body []byte, v any, example string) *httplimit.Problem {
	if len(bytes.TrimSpace(body)) == 0 {
		return front.BadRequest("malformed_json", "the request body is empty; send a JSON object such as %s", example)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonProblem(err, example)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return front.BadRequest("malformed_json", "the request body holds more than one JSON value; send one object such as %s", example)
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
		return front.BadRequest("malformed_json", "the request body is not valid JSON (at byte %d: %v); send an object such as %s", syntax.Offset, syntax, example)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return front.BadRequest("malformed_json", "the request body must be a JSON object such as %s, not %s", example, typ.Value)
		}
		return front.BadRequest("malformed_json", "field %q must be %s, not %s; send an object such as %s", typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value, example)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return front.BadRequest("malformed_json", "the request body ends in the middle of a JSON value; send an object such as %s", example)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return front.BadRequest("malformed_json", "%s; the fields are those of %s", strings.TrimPrefix(err.Error(), "json: "), example)
	}
	return front.BadRequest("malformed_json", "the request body is not valid JSON (%v); send an object such as %s", err, example)
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

// textProblem is the problem of a body whose text is not UTF-8 at off:
// invalid_attribute when off is in the name or value of one of its
// attributes, malformed_json otherwise.
func textProblem(body []byte, off int) *httplimit.Problem {
	if name, ok := attributeAt(body, off); ok {
		return front.InputProblem(edge.InvalidAttribute(name))
	}
	return front.BadRequest("malformed_json", "the request body is not UTF-8 text at byte %d (a byte that is not UTF-8, or an escape of half a surrogate pair); send JSON text in UTF-8", off)
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
