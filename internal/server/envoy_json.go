package server

import (
	"math"
	"strconv"
	"unicode/utf8"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// POST /json speaks protobuf's JSON mapping. Its common bodies are decoded
// and its answers encoded by hand, without protojson's reflection; anything
// else is left to protojson, so an unusual body is decoded, and a bad one
// answered, word for word as protojson does (envoy_json_test.go holds the
// differential tests).

// decodeEnvoy decodes body, a RateLimitRequest in protobuf's JSON mapping,
// into req when it has the common shape, and reports whether it did: one
// object of the fields domain (a string), descriptors (an array of objects
// whose one field is entries, an array of objects of the string fields key
// and value) and hitsAddend or hits_addend (a whole number in uint32's
// range, with no sign, fraction or exponent), each at most once and none
// null. Every body it decodes protojson.Unmarshal decodes to an equal
// message; it reports false, leaving req as it was, for every body
// protojson rejects, and for others (other fields, nulls, numbers given as
// strings...), which protojson then decodes. The strings of req share one
// allocation, the descriptors one and their slice another, and so the
// entries; sc's buffers hold the rest.
func (sc *decideScratch) decodeEnvoy(body []byte, req *rlsv3.RateLimitRequest) bool {
	d := lexer{b: body, text: sc.text[:0]}
	sc.pairs, sc.groups = sc.pairs[:0], sc.groups[:0]
	var (
		domain   textSpan
		hits     uint32
		seenHits bool
	)
	d.space()
	ok := d.object(requestFields, func(field int) bool {
		var ok bool
		switch field {
		case 0: // domain
			domain, ok = d.str()
		case 1: // descriptors
			ok = d.descriptors(&sc.pairs, &sc.groups)
		default: // hitsAddend, hits_addend: one field under two names
			if seenHits {
				return false
			}
			seenHits = true
			hits, ok = d.uint32()
		}
		return ok
	})
	d.space()
	if !ok || d.i != len(body) {
		return false
	}

	// One string holds the text of every string of the request.
	sc.text = d.text
	text := string(d.text)
	req.Domain = text[domain.from:domain.to]
	req.HitsAddend = hits
	if len(sc.groups) > 0 {
		descs := make([]ratelimitv3.RateLimitDescriptor, len(sc.groups))
		req.Descriptors = make([]*ratelimitv3.RateLimitDescriptor, len(sc.groups))
		var ptrs []*ratelimitv3.RateLimitDescriptor_Entry
		if len(sc.pairs) > 0 {
			entries := make([]ratelimitv3.RateLimitDescriptor_Entry, len(sc.pairs))
			ptrs = make([]*ratelimitv3.RateLimitDescriptor_Entry, len(sc.pairs))
			for i, p := range sc.pairs {
				en := &entries[i]
				en.Key, en.Value = text[p.name.from:p.name.to], text[p.value.from:p.value.to]
				ptrs[i] = en
			}
		}
		from := 0
		for i, to := range sc.groups {
			if to > from {
				descs[i].Entries = ptrs[from:to:to]
			}
			req.Descriptors[i] = &descs[i]
			from = to
		}
	}
	return true
}

// The field names decodeEnvoy reads, by their index; a field of protobuf
// is named by its JSON name or by its own.
var (
	requestFields    = []string{"domain", "descriptors", "hitsAddend", "hits_addend"}
	descriptorFields = []string{"entries"}
	entryFields      = []string{"key", "value"}
)

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

// descriptors reads an array of descriptors of entries alone, appending
// their entries to pairs (key as name) and, for each descriptor, the end
// of its entries in pairs to groups.
func (d *lexer) descriptors(pairs *[]textPair, groups *[]int) bool {
	return d.array(func() bool {
		ok := d.object(descriptorFields, func(int) bool { return d.entries(pairs) })
		*groups = append(*groups, len(*pairs))
		return ok
	})
}

// entries reads an array of entries, objects of the string fields key and
// value (each "" when absent), appending them to pairs.
func (d *lexer) entries(pairs *[]textPair) bool {
	return d.array(func() bool {
		var p textPair
		ok := d.object(entryFields, func(field int) bool {
			var ok bool
			if field == 0 {
				p.name, ok = d.str()
			} else {
				p.value, ok = d.str()
			}
			return ok
		})
		*pairs = append(*pairs, p)
		return ok
	})
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

// appendEnvoyResponse appends r as protojson.Marshal encodes it, up to the
// space between tokens (which protojson varies on purpose), and reports
// whether it did. It encodes the fields sluice sets: overall_code,
// statuses (code, current_limit, limit_remaining, duration_until_reset)
// and response_headers_to_add (key, value). It reports false, with b cut
// back to its length, where protojson.Marshal may differ: another field
// set, a nil element of a list, text that is not UTF-8 (which protojson
// refuses), a duration out of protobuf's range.
func appendEnvoyResponse(b []byte, r *rlsv3.RateLimitResponse) ([]byte, bool) {
	start := len(b)
	if r == nil || len(r.RequestHeadersToAdd) > 0 || len(r.RawBody) > 0 || r.DynamicMetadata != nil || r.Quota != nil {
		return b, false
	}
	b = append(b, '{')
	if r.OverallCode != 0 {
		b = appendEnum(appendName(b, "overallCode"), int32(r.OverallCode), rlsv3.RateLimitResponse_Code_name)
	}
	if len(r.Statuses) > 0 {
		b = append(appendName(b, "statuses"), '[')
		for i, st := range r.Statuses {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendDescriptorStatus(b, st); !ok {
				return b[:start], false
			}
		}
		b = append(b, ']')
	}
	if len(r.ResponseHeadersToAdd) > 0 {
		b = append(appendName(b, "responseHeadersToAdd"), '[')
		for i, h := range r.ResponseHeadersToAdd {
			if h == nil || len(h.RawValue) > 0 || !utf8.ValidString(h.Key) || !utf8.ValidString(h.Value) {
				return b[:start], false
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			if h.Key != "" {
				b = appendString(appendName(b, "key"), h.Key)
			}
			if h.Value != "" {
				b = appendString(appendName(b, "value"), h.Value)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}'), true
}

// appendDescriptorStatus appends st as protojson encodes it, or reports
// false (see appendEnvoyResponse).
func appendDescriptorStatus(b []byte, st *rlsv3.RateLimitResponse_DescriptorStatus) ([]byte, bool) {
	if st == nil || st.Quota != nil {
		return b, false
	}
	b = append(b, '{')
	if st.Code != 0 {
		b = appendEnum(appendName(b, "code"), int32(st.Code), rlsv3.RateLimitResponse_Code_name)
	}
	if l := st.CurrentLimit; l != nil {
		if !utf8.ValidString(l.Name) {
			return b, false
		}
		b = append(appendName(b, "currentLimit"), '{')
		if l.Name != "" {
			b = appendString(appendName(b, "name"), l.Name)
		}
		if l.RequestsPerUnit != 0 {
			b = strconv.AppendUint(appendName(b, "requestsPerUnit"), uint64(l.RequestsPerUnit), 10)
		}
		if l.Unit != 0 {
			b = appendEnum(appendName(b, "unit"), int32(l.Unit), rlsv3.RateLimitResponse_RateLimit_Unit_name)
		}
		if l.UnitMultiplier != nil {
			// A wrapper is written as the value it wraps, even 0.
			b = strconv.AppendUint(appendName(b, "unitMultiplier"), uint64(l.UnitMultiplier.Value), 10)
		}
		b = append(b, '}')
	}
	if st.LimitRemaining != 0 {
		b = strconv.AppendUint(appendName(b, "limitRemaining"), uint64(st.LimitRemaining), 10)
	}
	if st.DurationUntilReset != nil {
		var ok bool
		if b, ok = appendDuration(appendName(b, "durationUntilReset"), st.DurationUntilReset); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// appendName appends an object member's name and colon, after a comma
// unless it is the object's first.
func appendName(b []byte, name string) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

// appendEnum appends an enum's value as protojson does: its name, or its
// number when it has none.
func appendEnum(b []byte, v int32, names map[int32]string) []byte {
	if name, ok := names[v]; ok {
		return append(append(append(b, '"'), name...), '"')
	}
	return strconv.AppendInt(b, int64(v), 10)
}

// Protobuf's range of a google.protobuf.Duration, as protojson checks it.
const (
	maxDurationSeconds = 315576000000
	maxDurationNanos   = 999999999
)

// appendDuration appends d as protojson encodes a google.protobuf.Duration:
// a string of seconds with 0, 3, 6 or 9 fractional digits, as few as say
// it exactly ("59s", "1.500s", "-0.000001s"). It reports false for a
// duration protojson refuses: out of range, or seconds and nanos of
// different signs.
func appendDuration(b []byte, d *durationpb.Duration) ([]byte, bool) {
	secs, nanos := d.Seconds, int64(d.Nanos)
	if secs < -maxDurationSeconds || secs > maxDurationSeconds || nanos < -maxDurationNanos || nanos > maxDurationNanos ||
		(secs > 0 && nanos < 0) || (secs < 0 && nanos > 0) {
		return b, false
	}
	b = append(b, '"')
	if secs < 0 || nanos < 0 {
		b, secs, nanos = append(b, '-'), -secs, -nanos
	}
	b = strconv.AppendInt(b, secs, 10)
	if nanos != 0 {
		digits := 9
		for digits > 0 && nanos%1000 == 0 {
			nanos /= 1000
			digits -= 3
		}
		b = append(b, '.')
		p := int64(1)
		for range digits - 1 {
			p *= 10
		}
		for ; p > 0; p /= 10 {
			b = append(b, byte('0'+nanos/p%10))
		}
	}
	return append(b, 's', '"'), true
}
