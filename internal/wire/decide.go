package wire

import (
	"bytes"
	"sync"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/front"
)

// DecideRequest is the body of /v1/decide, /v1/peek and /v1/record.
type DecideRequest struct {
	Policy     string            `json:"policy"`
	Attributes map[string]string `json:"attributes"`

	// Cost is nil when absent, which means 1 (CostOf).
	Cost *int64 `json:"cost"`
}

// CostOf is the cost of a request whose cost field is cost: 1 when absent.
func CostOf(cost *int64) int64 {
	if cost == nil {
		return 1
	}
	return *cost
}

// The body of /v1/decide, /v1/peek and /v1/record is decoded by hand, into
// memory reused between requests: no reflection, one allocation for the
// text of all its strings. The hand decoder accepts exactly the bodies that
// encoding/json and the checks of DecodeJSON accept, with the same value
// (decide_test.go holds the differential fuzz test); it rejects every
// other body without saying why, and ParseDecide then asks DecodeJSON for
// the problem that says what is wrong, so a bad body is answered word for
// word as encoding/json alone would have it.

// Scratch is the memory of one decide request (or of a batch of
// them, one after another, or of one POST /json), reused between requests
// through a pool.
type Scratch struct {
	Body  []byte            // the request body
	text  []byte            // the decoded strings, one after another
	pairs []textPair        // the attributes: name and value in text, in order
	attrs map[string]string // the attributes, filled from pairs
	cost  int64
	req   DecideRequest
	items [][]byte // the requests of a batch, in body
	Out   []byte   // the answer

	// groups are the end in pairs of each descriptor's entries, for POST
	// /json (its entries in pairs, key as name).
	groups []int
}

// textPair is an attribute's name and value: offsets in Scratch.text.
type textPair struct{ name, value textSpan }

// textSpan is text[from:to].
type textSpan struct{ from, to int }

// maxPooledBuffer bounds the buffers a Scratch keeps between
// requests: a rare large body or answer is not kept.
const maxPooledBuffer = 64 << 10

var scratches = sync.Pool{New: func() any { return &Scratch{attrs: make(map[string]string, 4)} }}

// GetScratch returns a Scratch from the pool; PutScratch gives it back.
func GetScratch() *Scratch { return scratches.Get().(*Scratch) }

// PutScratch returns sc to the pool. Nothing of what sc decoded may
// be used afterwards but the strings, which are the request's own.
func PutScratch(sc *Scratch) {
	if cap(sc.Body) > maxPooledBuffer || cap(sc.Out) > maxPooledBuffer || cap(sc.text) > maxPooledBuffer || len(sc.attrs) > 64 {
		return
	}
	clear(sc.attrs)
	sc.req = DecideRequest{}
	scratches.Put(sc)
}

// ParseDecide decodes body, a decide request, into memory of sc and checks
// that it names a policy; the edge checks the rest. The hand decoder
// decodes it, and DecodeJSON says what is wrong with a body it rejects.
// The request stays valid until sc is reused.
func (sc *Scratch) ParseDecide(body []byte) (*DecideRequest, *httplimit.Problem) {
	if !sc.decode(body) {
		var req DecideRequest
		if p := DecodeJSON(body, &req, front.DecideExample); p != nil {
			return nil, p
		}
		sc.req = req
	}
	if sc.req.Policy == "" {
		return nil, front.BadRequest("bad_request", "the request names no policy; send an object such as %s", front.DecideExample)
	}
	return &sc.req, nil
}

// decode decodes the JSON object body (or null) into sc.req, as
// DecodeJSON would, and reports whether it did. It reports false for every
// body DecodeJSON rejects (and may for others, which DecodeJSON then decodes): JSON that
// is not one object of the fields policy (a string), attributes (an object
// of strings) and cost (a whole number), each also null; text that is not
// UTF-8 or holds an escape of half a surrogate pair. As encoding/json, it
// matches field names without regard to case, lets a later field override
// an earlier one and merges two attributes objects, and reads a null
// attribute value as "".
func (sc *Scratch) decode(body []byte) bool {
	d := lexer{b: body, text: sc.text[:0]}
	sc.pairs = sc.pairs[:0]
	var (
		f          decidedFields
		fieldsDone bool
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
	for !fieldsDone {
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
		if !sc.field(&d, field, &f) {
			return false
		}
		if fieldsDone, ok = d.member('}'); !ok {
			return false
		}
	}
	d.space()
	if d.i != len(body) {
		return false
	}

	sc.text = d.text
	sc.fill(&f)
	return true
}

// decidedFields are the fields of a decide request as decode reads them.
type decidedFields struct {
	policy    textSpan
	hasPolicy bool
	attrsSet  bool // the last attributes field was an object, not null
	hasCost   bool
	cost      int64
}

// field reads the value of the field named name into f, as encoding/json
// would, and reports false at anything decodeJSON may reject: an unknown
// field, a value of the wrong type.
func (sc *Scratch) field(d *lexer, name []byte, f *decidedFields) bool {
	var ok bool
	switch {
	case matchField(name, "policy"):
		if d.null() {
			return true // null leaves a string as it was
		}
		f.policy, ok = d.str()
		f.hasPolicy = ok
	case matchField(name, "attributes"):
		if d.null() {
			f.attrsSet, sc.pairs = false, sc.pairs[:0]
			return true
		}
		ok = d.attributes(&sc.pairs)
		f.attrsSet = ok
	case matchField(name, "cost"):
		if d.null() {
			f.hasCost = false
			return true
		}
		f.cost, ok = d.int()
		f.hasCost = ok
	}
	return ok // false for an unknown field too
}

// fill makes sc.req the request of f, whose strings are in sc.text: one
// string holds the text of every string the body decoded to.
func (sc *Scratch) fill(f *decidedFields) {
	text := string(sc.text)
	sc.req = DecideRequest{}
	if f.hasPolicy {
		sc.req.Policy = text[f.policy.from:f.policy.to]
	}
	if f.attrsSet {
		clear(sc.attrs)
		for _, p := range sc.pairs {
			sc.attrs[text[p.name.from:p.name.to]] = text[p.value.from:p.value.to]
		}
		sc.req.Attributes = sc.attrs
	}
	if f.hasCost {
		sc.cost = f.cost
		sc.req.Cost = &sc.cost
	}
}

// matchField reports whether name is the field named field, as
// encoding/json matches a struct's fields: exactly, or else under Unicode
// case folding.
func matchField(name []byte, field string) bool {
	return string(name) == field || bytes.EqualFold(name, []byte(field))
}
