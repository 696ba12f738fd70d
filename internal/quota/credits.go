package quota

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/store"
)

// Operations of a CreditRequest.
const (
	OpGet = "get"
	OpAdd = "add"
	OpSet = "set"
)

// CreditRequest is the body of POST /v1/credits, and what sluice credits
// asks: an operation on the balance of a Credits rule for one key.
type CreditRequest struct {
	Policy     string            `json:"policy"`
	Rule       string            `json:"rule,omitempty"` // "": the policy's only Credits rule
	Attributes map[string]string `json:"attributes,omitempty"`

	// Op is get, add or set; Amount the figure to add (below 0: take
	// away) or set; ID, for add and set, makes the change idempotent: a
	// change with an id already applied to this balance changes nothing.
	Op     string `json:"op"`
	Amount int64  `json:"amount,omitempty"`
	ID     string `json:"id,omitempty"`
}

// CreditExample is a valid CreditRequest, quoted in messages.
const CreditExample = `{"policy":"api","rule":"credits","attributes":{"user":"acme"},"op":"add","amount":5000,"id":"invoice-1042"}`

// Balance is the answer of POST /v1/credits: the balance after the call,
// whether the call changed it as asked (false for get, and for an id
// applied before), and the milliseconds until the next refill (0 when
// the rule has none).
type Balance struct {
	Balance      int64 `json:"balance"`
	Applied      bool  `json:"applied"`
	NextRefillMS int64 `json:"next_refill_ms"`
}

// Check returns what is wrong with req, naming the field, or nil.
func (req *CreditRequest) Check() error {
	switch {
	case req.Policy == "":
		return invalid("policy is missing; name the policy of the credits rule")
	case req.Op != OpGet && req.Op != OpAdd && req.Op != OpSet:
		return invalid("op %q: use add, set or get", req.Op)
	case req.Op == OpGet && (req.Amount != 0 || req.ID != ""):
		return invalid("op get reads the balance; leave out amount and id")
	case req.Op == OpAdd && req.Amount == 0:
		return invalid("amount is 0 (or missing): give the amount to add, below 0 to take away")
	case req.Amount < -sluice.MaxCost || req.Amount > sluice.MaxCost:
		return invalid("amount %d out of range: give -2^53 to 2^53 (%d)", req.Amount, int64(sluice.MaxCost))
	case len(req.ID) > store.MaxCreditID:
		return invalid("id of %d bytes: at most %d", len(req.ID), store.MaxCreditID)
	}
	return nil
}

// Credit applies req to the balance of p's Credits rule for the key
// req.Attributes select. p is the policy req.Policy names.
func (s Source) Credit(ctx context.Context, p *sluice.Policy, req *CreditRequest) (Balance, error) {
	if err := req.Check(); err != nil {
		return Balance{}, err
	}
	r, err := findRule(p, req.Rule, "credits rule", IsCredits)
	if err != nil {
		return Balance{}, err
	}
	if _, ok := s.Store.(store.Crediter); !ok {
		return Balance{}, fmt.Errorf("%w: credits of policy %q rule %q", ErrNoStore, p.Name, r.Name)
	}
	var b sluice.Balance
	switch req.Op {
	case OpGet:
		b, err = s.Limiter.Credits(ctx, p, r.Name, req.Attributes)
	case OpAdd:
		b, err = s.Limiter.AddCredits(ctx, p, r.Name, req.Attributes, req.Amount, req.ID)
	case OpSet:
		b, err = s.Limiter.SetCredits(ctx, p, r.Name, req.Attributes, req.Amount, req.ID)
	}
	if err != nil {
		return Balance{}, err
	}
	return Balance{Balance: b.Balance, Applied: b.Applied, NextRefillMS: b.NextRefill.Milliseconds()}, nil
}

// Text is b, the answer to req, for a person: the balance, whether the
// change was applied, and when the next refill comes.
func (b Balance) Text(req *CreditRequest) string {
	s := fmt.Sprintf("balance %d", b.Balance)
	switch {
	case req.Op == OpGet:
	case b.Applied:
		s += fmt.Sprintf(" (%s %d applied)", req.Op, req.Amount)
	default:
		s += fmt.Sprintf(" (not applied: id %q was applied to this balance before)", req.ID)
	}
	if b.NextRefillMS > 0 {
		s += ", next refill in " + (time.Duration(b.NextRefillMS) * time.Millisecond).String()
	}
	return s
}
