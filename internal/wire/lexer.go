// Package wire holds sluice serve's hand codecs: the JSON of the decide
// API's requests and answers, of its batches and of Envoy's POST /json.
// Each reads or writes, with no reflection and in memory reused between
// requests, exactly what its library would, and leaves every other input to
// that library (encoding/json, protojson), which then answers word for
// word as before: a differential fuzz test beside each holds it to that.
// Package grpccodec is the gRPC one.
package wire

import (
	"math"
	"unicode/utf16"
	"unicode/utf8"
)

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
		if closed, ok := d.member('}'); !ok || closed {
			return ok
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

// fieldName reads an object member's name and the colon after it, with the
// space around them, and returns the index of the name in fields; it
// reports false for any other name. A name is matched exactly, as protojson
// matches it.
func (d *lexer) fieldName(fields []string) (int, bool) {
	mark := len(d.text)
	name, ok := d.str()
	if !ok {
		return 0, false
	}
	i := 0
	for i < len(fields) && string(d.text[name.from:name.to]) != fields[i] {
		i++
	}
	d.text = d.text[:mark] // a name is not kept
	d.space()
	if i == len(fields) || !d.next(':') {
		return 0, false
	}
	d.space()
	return i, true
}

// member reads what follows a member of an object or array closed by
// closer: a comma and the space after it, or closer; it reports whether
// it read closer, and false for ok at anything else.
func (d *lexer) member(closer byte) (closed, ok bool) {
	d.space()
	switch {
	case d.next(','):
		d.space()
		return false, true
	case d.next(closer):
		return true, true
	}
	return false, false
}

// array reads a JSON array, with item reading each element, and the space
// inside it.
func (d *lexer) array(item func() bool) bool {
	if !d.next('[') {
		return false
	}
	d.space()
	for closed := d.next(']'); !closed; {
		var ok bool
		if !item() {
			return false
		}
		if closed, ok = d.member(']'); !ok {
			return false
		}
	}
	return true
}

// object reads a JSON object whose members are named among fields, each
// at most once, with value reading each member's value given the index of
// its name, and the space inside it.
func (d *lexer) object(fields []string, value func(field int) bool) bool {
	if !d.next('{') {
		return false
	}
	d.space()
	var seen uint64 // by index in fields, at most 64
	for closed := d.next('}'); !closed; {
		field, ok := d.fieldName(fields)
		if !ok || seen&(1<<field) != 0 || !value(field) {
			return false
		}
		seen |= 1 << field
		if closed, ok = d.member('}'); !ok {
			return false
		}
	}
	return true
}

// uint32 reads a JSON number that is a whole number in uint32's range,
// written without a sign, fraction or exponent.
func (d *lexer) uint32() (uint32, bool) {
	if d.i >= len(d.b) || d.b[d.i] < '0' || d.b[d.i] > '9' {
		return 0, false
	}
	n, ok := d.int()
	if !ok || n > math.MaxUint32 {
		return 0, false
	}
	return uint32(n), true
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
