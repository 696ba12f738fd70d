package wire

import (
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// POST /json speaks protobuf's JSON mapping. Its common bodies are decoded
// and its answers encoded by hand, without protojson's reflection; anything
// else is left to protojson, so an unusual body is decoded, and a bad one
// answered, word for word as protojson does (envoy_test.go holds the
// differential tests).

// DecodeEnvoy decodes body, a RateLimitRequest in protobuf's JSON mapping,
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
func (sc *Scratch) DecodeEnvoy(body []byte, req *rlsv3.RateLimitRequest) bool {
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

// The field names DecodeEnvoy reads, by their index; a field of protobuf
// is named by its JSON name or by its own.
var (
	requestFields    = []string{"domain", "descriptors", "hitsAddend", "hits_addend"}
	descriptorFields = []string{"entries"}
	entryFields      = []string{"key", "value"}
)

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
