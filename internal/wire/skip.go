package wire

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
