package tracing

import (
	"slices"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicerate/sluice/store"
)

// The attributes of a store call's span.

// Fits reports whether a decided request fit: every window it checks
// fits, is shadowed, or is a calendar quota whose credits paid for it
// (store.Waived).
func Fits(req *store.Request) bool {
	for i, r := range req.Results {
		if !r.Fits && !req.Checks[i].Shadow && !store.Waived(req.Checks, req.Results, i) {
			return false
		}
	}
	return true
}

// Failed marks span failed with err.
func Failed(span trace.Span, err error) {
	span.RecordError(err)
	span.SetStatus(otelcodes.Error, err.Error())
}

// BudgetAttributes are a store.Budgeter call's attributes before it runs:
// what it does with slices (sluice.budget.op: lease, renew or return), the
// policy, the rules whose slices it asks for and gives back, the windows
// it decides, and the units asked and returned.
func BudgetAttributes(req *store.Request, b *store.BudgetRequest) []attribute.KeyValue {
	var rules []string
	var asked, returned int64
	for _, a := range b.Asks {
		asked += a.Want
		if a.Check >= 0 && a.Check < len(req.Checks) && !slices.Contains(rules, req.Checks[a.Check].Rule) {
			rules = append(rules, req.Checks[a.Check].Rule)
		}
	}
	for i := range b.Returns {
		r := &b.Returns[i]
		returned += r.Granted - r.Used
		if !slices.Contains(rules, r.Check.Rule) {
			rules = append(rules, r.Check.Rule)
		}
	}
	op := "return"
	if len(b.Asks) > 0 {
		op = "lease"
		if len(b.Returns) > 0 {
			op = "renew"
		}
	}
	return []attribute.KeyValue{attribute.String("sluice.budget.op", op), attribute.String("sluice.policy", req.Policy),
		attribute.StringSlice("sluice.rules", rules), attribute.Int("sluice.windows", len(req.Checks)),
		attribute.Int64("sluice.budget.units_asked", asked), attribute.Int64("sluice.budget.units_returned", returned)}
}

// BudgetDone sets what a store.Budgeter call answered on its span: its
// error, or the units granted and, when it decided a request, whether
// the request fit.
func BudgetDone(span trace.Span, req *store.Request, b *store.BudgetRequest, err error) {
	if err != nil {
		Failed(span, err)
		return
	}
	var granted int64
	for _, g := range b.Grants {
		granted += g.Granted
	}
	span.SetAttributes(attribute.Int64("sluice.budget.units_granted", granted))
	if len(req.Checks) > 0 {
		span.SetAttributes(attribute.Bool("sluice.fits", Fits(req)))
	}
}
