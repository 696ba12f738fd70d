package edge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/sluicerate/sluice"
)

// Kind is the class of an Outcome.
type Kind uint8

const (
	// Allowed: every policy allowed the request. A shadow policy's would-be
	// denial and a decision of the failure policy under allow are allowed.
	Allowed Kind = iota

	// Denied: a policy's quota denied the request: a rule did not fit, on
	// the store or on the Limiter's fallback store.
	Denied

	// Unavailable: the store failed and the failure policy denied the
	// request (fail closed). No quota was consulted.
	Unavailable

	// BadInput: the request cannot be decided as sent (a cost below 1, an
	// unknown policy, a missing attribute or one that is not valid UTF-8 or
	// cannot be read, a cost above a limit). Nothing was recorded.
	BadInput

	// Failed: the Limiter returned an error the edge does not know. Nothing
	// is known of the request.
	Failed
)

// Outcome is the answer to one request at the edge, for a protocol to
// render. It is a plain value; it holds the decisions of a few policies in
// itself, so that deciding allocates nothing for them.
type Outcome struct {
	// Kind says which answer it is.
	Kind Kind

	// Policy is the last policy decided: the one that denied the request
	// (Denied, Unavailable), whose decision failed (BadInput, Failed), or
	// the last of all (Allowed); nil when the request failed before any
	// policy was decided.
	Policy *sluice.Policy

	// Attribute names the attribute at fault in a BadInput: missing, not
	// valid UTF-8, or unreadable by its key. Empty when the fault is
	// elsewhere.
	Attribute string

	// Err is why: for BadInput an error that Classify knows (when it wraps
	// one of sluice's sentinel errors or ErrInvalidAttribute) or a key's
	// error; the store's error for Unavailable; the Limiter's for Failed.
	Err error

	// KeyErr is the error of the key that read Attribute, when the key
	// reported it absent or could not read it.
	KeyErr error

	// Leases are, for OpAcquire when Allowed, the lease of each policy, in
	// order, for the caller to release or settle. A request that is not
	// allowed holds none: the leases of the policies before the one that
	// denied it were released.
	Leases []*sluice.Lease

	n      int                              // decisions
	inline [inlineDecisions]sluice.Decision // the first decisions
	more   []sluice.Decision                // all of them, when there are more
}

// inlineDecisions is how many decisions an Outcome holds in itself.
const inlineDecisions = 4

// Decisions returns the decisions of the policies decided, in order: all of
// them when Allowed, up to the one that settled the request when Denied or
// Unavailable. They make the RateLimit headers. The slice shares o's
// memory.
func (o *Outcome) Decisions() []sluice.Decision {
	if o.more != nil {
		return o.more
	}
	return o.inline[:o.n]
}

// Decision returns the decision that settled the request: the last of
// Decisions, or the zero Decision when there is none.
func (o *Outcome) Decision() sluice.Decision {
	ds := o.Decisions()
	if len(ds) == 0 {
		return sluice.Decision{}
	}
	return ds[len(ds)-1]
}

// add appends d to the decisions.
func (o *Outcome) add(d sluice.Decision) {
	switch {
	case o.more != nil:
		o.more = append(o.more, d)
	case o.n < len(o.inline):
		o.inline[o.n] = d
		o.n++
	default:
		o.more = append(append(make([]sluice.Decision, 0, 2*o.n), o.inline[:o.n]...), d)
	}
}

// release releases o's leases: the request they were taken for is not
// admitted after all.
func (o *Outcome) release(ctx context.Context) {
	for _, x := range o.Leases {
		_, _ = x.Release(ctx) // a lease not released expires
	}
	o.Leases = nil
}

// Class is how a problem is answered over HTTP: a status and the problem
// code that names its class for programs.
type Class struct {
	Status int
	Code   string
}

// Class returns how o is answered by an endpoint that answers a denial with
// 429 and a store failure with 503 (the JSON API answers both with a
// decision instead): 200 when allowed, 429 when denied, 503 "unavailable",
// Classify's class for bad input (400 "bad_request" for an error it does
// not know), 500 "internal" when failed.
func (o *Outcome) Class() Class {
	switch o.Kind {
	case Allowed:
		return Class{Status: http.StatusOK}
	case Denied:
		return Class{Status: http.StatusTooManyRequests}
	case Unavailable:
		return Class{Status: http.StatusServiceUnavailable, Code: "unavailable"}
	case BadInput:
		if c, ok := Classify(o.Err); ok {
			return c
		}
		return Class{Status: http.StatusBadRequest, Code: "bad_request"}
	}
	return Class{Status: http.StatusInternalServerError, Code: "internal"}
}

// ErrInvalidAttribute reports an attribute value that is not valid UTF-8.
// Attribute values are text: bytes that are not would each be read as
// U+FFFD by some protocols and make different clients one.
var ErrInvalidAttribute = errors.New("sluice: invalid attribute value")

// InvalidAttribute returns the error of an attribute whose name or value
// is not valid UTF-8. It wraps ErrInvalidAttribute.
func InvalidAttribute(name string) error {
	return fmt.Errorf("%w: %q is not valid UTF-8; send attribute names and values as UTF-8 text", ErrInvalidAttribute, name)
}

// CheckAttributes returns an error wrapping ErrInvalidAttribute for the
// first of names whose value in attrs is not valid UTF-8, and its name.
// Names without a value are not checked.
func CheckAttributes(attrs map[string]string, names []string) (string, error) {
	for _, a := range names {
		if v, ok := attrs[a]; ok && !utf8.ValidString(v) {
			return a, InvalidAttribute(a)
		}
	}
	return "", nil
}

// costError reports a cost below 1 or above sluice.MaxCost.
type costError struct{ cost int64 }

func (e *costError) Error() string {
	return fmt.Sprintf("cost is %d; a cost is 1 to 2^53 (%d); leave it out for 1", e.cost, int64(sluice.MaxCost))
}

func (e *costError) Unwrap() error { return sluice.ErrInvalidCost }

// CheckCost returns an error wrapping sluice.ErrInvalidCost when cost is
// below 1 or above sluice.MaxCost. It is the edge's one check of a cost,
// before any attribute is read; a cost above a rule's limit is the
// Limiter's to find.
func CheckCost(cost int64) error {
	if cost < 1 || cost > sluice.MaxCost {
		return &costError{cost: cost}
	}
	return nil
}

// classes maps sluice's errors for bad input, and the edge's, to their
// class: the one table of them.
var classes = [...]struct {
	err   error
	class Class
}{
	{ErrInvalidAttribute, Class{http.StatusBadRequest, "invalid_attribute"}},
	{ErrUnknownPolicy, Class{http.StatusBadRequest, "unknown_policy"}},
	{sluice.ErrMissingAttribute, Class{http.StatusBadRequest, "missing_attribute"}},
	{sluice.ErrInvalidCost, Class{http.StatusBadRequest, "invalid_cost"}},
	{sluice.ErrCostExceedsLimit, Class{http.StatusBadRequest, "cost_exceeds_limit"}},
	{sluice.ErrInvalidPolicy, Class{http.StatusBadRequest, "bad_request"}},
	{sluice.ErrEmptyPolicy, Class{http.StatusBadRequest, "bad_request"}},
	{ErrUnknownSchedule, Class{http.StatusBadRequest, "unknown_schedule"}},
	{sluice.ErrInvalidLease, Class{http.StatusBadRequest, "invalid_lease"}},
	{sluice.ErrInvalidCredit, Class{http.StatusBadRequest, "invalid_credit"}},
	{sluice.ErrInvalidSchedule, Class{http.StatusBadRequest, "bad_request"}},
}

// Classify returns the class of an error for bad input: one that wraps one
// of sluice's sentinel errors for bad input (ErrUnknownPolicy,
// ErrMissingAttribute, ErrInvalidCost, ...) or ErrInvalidAttribute. It
// reports false for any other error, a store failure among them.
func Classify(err error) (Class, bool) {
	if err == nil {
		return Class{}, false
	}
	for _, c := range classes {
		if errors.Is(err, c.err) {
			return c.class, true
		}
	}
	return Class{}, false
}
