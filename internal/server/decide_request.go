package server

import (
	"bytes"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/sluicerate/sluice/httplimit"
)

// The body of /v1/decide, /v1/peek and /v1/record is decoded by hand, into
// memory reused between requests: no reflection, one allocation for the
// text of all its strings. The hand decoder accepts exactly the bodies that
// encoding/json and the checks of decodeJSON accept, with the same value
// (decide_request_test.go holds the differential fuzz test); it rejects
// every other body without saying why, and parseDecide then asks
// decodeJSON for the problem that says what is wrong, so a bad body is
// answered word for word as before.

// decideScratch is the memory of one decide request (or of a batch of
// them, one after another, or of one POST /json), reused between requests
// through a pool.
type decideScratch struct {
	body  []byte            // the request body
	text  []byte            // the decoded strings, one after another
	pairs []textPair        // the attributes: name and value in text, in order
	attrs map[string]string // the attributes, filled from pairs
	cost  int64
	req   decideRequest
	items [][]byte // the requests of a batch, in body
	out   []byte   // the answer

	// groups are the end in pairs of each descriptor's entries, for POST
	// /json (its entries in pairs, key as name).
	groups []int
}

// textPair is an attribute's name and value: offsets in decideScratch.text.
type textPair struct{ name, value textSpan }

// textSpan is text[from:to].
type textSpan struct{ from, to int }

// maxPooledBuffer bounds the buffers a decideScratch keeps between
// requests: a rare large body or answer is not kept.
const maxPooledBuffer = 64 << 10

var decideScratches = sync.Pool{New: func() any { return &decideScratch{attrs: make(map[string]string, 4)} }}

func getDecideScratch() *decideScratch { return decideScratches.Get().(*decideScratch) }

// putDecideScratch returns sc to the pool. Nothing of what sc decoded may
// be used afterwards but the strings, which are the request's own.
func putDecideScratch(sc *decideScratch) {
	if cap(sc.body) > maxPooledBuffer || cap(sc.out) > maxPooledBuffer || cap(sc.text) > maxPooledBuffer || len(sc.attrs) > 64 {
		return
	}
	clear(sc.attrs)
	sc.req = decideRequest{}
	decideScratches.Put(sc)
}

// parse decodes body into sc.req and checks that it names a policy (see
// parseDecide); the request stays valid until sc is reused.
func (sc *decideScratch) parse(body []byte) (*decideRequest, *httplimit.Problem) {
	if !sc.decode(body) {
		var req decideRequest
		if p := decodeJSON(body, &req, decideExample); p != nil {
			return nil, p
		}
		sc.req = req
	}
	if sc.req.Policy == "" {
		return nil, badRequest("bad_request", "the request names no policy; send an object such as %s", decideExample)
	}
	return &sc.req, nil
}

// decode decodes the JSON object body (or null) into sc.req, as
// decodeJSON would, and reports whether it did. It reports false for every body decodeJSON
// rejects (and may for others, which decodeJSON then decodes): JSON that
// is not one object of the fields policy (a string), attributes (an object
// of strings) and cost (a whole number), each also null; text that is not
// UTF-8 or holds an escape of half a surrogate pair. As encoding/json, it
// matches field names without regard to case, lets a later field override
// an earlier one and merges two attributes objects, and reads a null
// attribute value as "".
func (sc *decideScratch) decode(body []byte) bool {
	d := lexer{b: body, text: sc.text[:0]}
	sc.pairs = sc.pairs[:0]
	var (
		policy          textSpan
		hasPolicy       bool
		attrsSet        bool // the last attributes field was an object, not null
		hasCost         bool
		cost            int64
		fieldsDone, bad bool
	)
	d.space()
	switch {
	case d.null():
		fieldsDone = true // null decodes to nothing, as encoding/json decodes it
	case !d.next('{'):
		return false
	default:
		d.space()
		fieldsDone = d.next('}')
	}
	for !fieldsDone && !bad {
		mark := len(d.text)
		key, ok := d.str()
		if !ok {
			return false
		}
		field := d.text[key.from:key.to]
		d.text = d.text[:mark] // a field's name is not kept
		d.space()
		if !d.next(':') {
			return false
		}
		d.space()
		switch {
		case matchField(field, "policy"):
			if d.null() {
				break // null leaves a string as it was
			}
			if policy, ok = d.str(); !ok {
				return false
			}
			hasPolicy = true
		case matchField(field, "attributes"):
			if d.null() {
				attrsSet, sc.pairs = false, sc.pairs[:0]
				break
			}
			if !d.attributes(&sc.pairs) {
				return false
			}
			attrsSet = true
		case matchField(field, "cost"):
			if d.null() {
				hasCost = false
				break
			}
			if cost, ok = d.int(); !ok {
				return false
			}
			hasCost = true
		default:
			return false // an unknown field
		}
		d.space()
		switch {
		case d.next(','):
			d.space()
		case d.next('}'):
			fieldsDone = true
		default:
			bad = true
		}
	}
	d.space()
	if bad || d.i != len(body) {
		return false
	}

	// One string holds the text of every string the body decoded to.
	sc.text = d.text
	text := string(d.text)
	sc.req = decideRequest{}
	if hasPolicy {
		sc.req.Policy = text[policy.from:policy.to]
	}
	if attrsSet {
		clear(sc.attrs)
		for _, p := range sc.pairs {
			sc.attrs[text[p.name.from:p.name.to]] = text[p.value.from:p.value.to]
		}
		sc.req.Attributes = sc.attrs
	}
	if hasCost {
		sc.cost = cost
		sc.req.Cost = &sc.cost
	}
	return true
}

// matchField reports whether name is the field named field, as
// encoding/json matches a struct's fields: exactly, or else under Unicode
// case folding.
func matchField(name []byte, field string) bool {
	return string(name) == field || bytes.EqualFold(name, []byte(field))
}

// lexer reads JSON text from b at i, appending the strings it decodes to
// text. Each method reports false, or reads nothing, at anything it does
// not accept.
type lexer struct {
	b    []byte
	i    int
	text []byte
}

// space skips JSON whitespace.
func (d *lexer) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// next reads c if it is the next byte.
func (d *lexer) next(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// null reads the literal null if it is next.
func (d *lexer) null() bool {
	if len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// attributes reads an object of string (or null) values, appending its
// members to pairs.
func (d *lexer) attributes(pairs *[]textPair) bool {
	if !d.next('{') {
		return false
	}
	d.space()
	if d.next('}') {
		return true
	}
	for {
		name, ok := d.str()
		if !ok {
			return false
		}
		d.space()
		if !d.next(':') {
			return false
		}
		d.space()
		var value textSpan
		if d.null() {
			value = textSpan{from: len(d.text), to: len(d.text)} // a null value is ""
		} else if value, ok = d.str(); !ok {
			return false
		}
		*pairs = append(*pairs, textPair{name: name, value: value})
		d.space()
		switch {
		case d.next(','):
			d.space()
		case d.next('}'):
			return true
		default:
			return false
		}
	}
}

// int reads a JSON number that is a whole number in int64's range, as
// encoding/json decodes into an int64: no fraction and no exponent.
func (d *lexer) int() (int64, bool) {
	neg := d.next('-')
	start := d.i
	var n uint64
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		if d.i-start == 19 {
			return 0, false // 10^19 and beyond are out of range
		}
		n = n*10 + uint64(d.b[d.i]-'0')
		d.i++
	}
	digits := d.i - start
	if digits == 0 || (digits > 1 && d.b[start] == '0') {
		return 0, false // no digits, or a leading zero
	}
	if d.i < len(d.b) {
		switch d.b[d.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	switch {
	case !neg && n <= 1<<63-1:
		return int64(n), true
	case neg && n <= 1<<63:
		return int64(-n), true
	}
	return 0, false
}

// str reads a JSON string, appends its text to d.text and returns where it
// is there. It rejects a string whose text is not UTF-8 or that holds an
// escape of half a surrogate pair: encoding/json would read either as
// U+FFFD.
func (d *lexer) str() (textSpan, bool) {
	if !d.next('"') {
		return textSpan{}, false
	}
	s := textSpan{from: len(d.text)}
	for {
		// The run of bytes that stand for themselves.
		start := d.i
		for d.i < len(d.b) {
			c := d.b[d.i]
			if c == '"' || c == '\\' || c < 0x20 {
				break
			}
			if c < utf8.RuneSelf {
				d.i++
				continue
			}
			r, n := utf8.DecodeRune(d.b[d.i:])
			if r == utf8.RuneError && n == 1 {
				return textSpan{}, false
			}
			d.i += n
		}
		d.text = append(d.text, d.b[start:d.i]...)
		if d.i >= len(d.b) || d.b[d.i] < 0x20 {
			return textSpan{}, false
		}
		if d.b[d.i] == '"' {
			d.i++
			s.to = len(d.text)
			return s, true
		}
		// An escape.
		if d.i+1 >= len(d.b) {
			return textSpan{}, false
		}
		c := d.b[d.i+1]
		d.i += 2
		switch c {
		case '"', '\\', '/':
			d.text = append(d.text, c)
		case 'b':
			d.text = append(d.text, '\b')
		case 'f':
			d.text = append(d.text, '\f')
		case 'n':
			d.text = append(d.text, '\n')
		case 'r':
			d.text = append(d.text, '\r')
		case 't':
			d.text = append(d.text, '\t')
		case 'u':
			r := hex4(d.b, d.i)
			if r < 0 {
				return textSpan{}, false
			}
			d.i += 4
			if utf16.IsSurrogate(r) {
				if r >= 0xdc00 || d.i+1 >= len(d.b) || d.b[d.i] != '\\' || d.b[d.i+1] != 'u' {
					return textSpan{}, false
				}
				lo := hex4(d.b, d.i+2)
				if lo < 0xdc00 || lo >= 0xe000 {
					return textSpan{}, false
				}
				d.i += 6
				r = utf16.DecodeRune(r, lo)
			}
			d.text = utf8.AppendRune(d.text, r)
		default:
			return textSpan{}, false
		}
	}
}
