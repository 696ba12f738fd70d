package sluice

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice/internal/hooks"
	"github.com/sluicerate/sluice/store"
)

// berlin is Europe/Berlin, for the tests' calendar quotas.
func berlin(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// apiPlan is 10 a second, 100,000 a month in Berlin with a year of
// history, then credits renewed to 500 each month: the policy of an API
// plan.
func apiPlan(t *testing.T) *Policy {
	loc := berlin(t)
	return &Policy{Name: "api", Rules: []Rule{
		{Name: "per-second", By: []string{"key"}, Limit: 10, Window: time.Second},
		{Name: "monthly", By: []string{"key"}, Period: Month, Location: loc, Limit: 100_000, History: 12},
		{Name: "overage", By: []string{"key"}, Algorithm: Credits, Limit: 500, Location: loc,
			Refill: Refill{To: 500, Every: Month}, Covers: "monthly"},
	}}
}

func TestQuotaRulesValid(t *testing.T) {
	t.Parallel()
	if err := apiPlan(t).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, r := range []Rule{
		{Name: "w", Period: Week, WeekStart: time.Monday, Limit: 0},
		{Name: "c", Algorithm: Credits},
		{Name: "c", Algorithm: Credits, Limit: 5, Refill: Refill{Add: 1, Every: Week}, WeekStart: time.Saturday},
	} {
		p := &Policy{Name: "p", Rules: []Rule{r}}
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", r, err)
		}
	}
}

func TestQuotaRulesInvalid(t *testing.T) {
	t.Parallel()
	loc := berlin(t)
	for _, tt := range []struct {
		rule Rule
		want string
	}{
		{Rule{Period: Month, Limit: 1, Window: time.Hour}, "a calendar quota takes no window"},
		{Rule{Period: Month, Limit: -1}, "limit -1 is negative"},
		{Rule{Period: Month, Limit: 1, Algorithm: GCRA}, "takes no algorithm"},
		{Rule{Period: Month, Limit: 1, MinGap: time.Second}, "takes no min gap or burst"},
		{Rule{Period: Month, Limit: 1, Spread: 2}, "cannot be spread"},
		{Rule{Period: Month, Limit: 1, Budget: time.Second}, "cannot be budgeted"},
		{Rule{Period: Month, Limit: 1, Concurrency: 1, Lease: time.Second}, "is not a concurrency rule"},
		{Rule{Period: Month, Limit: 1, History: MaxHistory + 1}, "history 1001"},
		{Rule{Period: Month, Limit: 1, WeekStart: time.Monday}, "a week start is for period week"},
		{Rule{Period: Week, Limit: 1, WeekStart: 7}, "week start 7 is not a day of the week"},
		{Rule{Period: Year + 1, Limit: 1}, "unknown period"},
		{Rule{Period: Month, Limit: 1, Refill: Refill{To: 1, Every: Day}}, "refill and covers are a credits rule's"},
		{Rule{Period: Month, Algorithm: Credits, Limit: 1}, "a credits rule has no period of its own"},
		{Rule{Algorithm: Credits, Limit: 1, Window: time.Minute}, "a credits rule takes no window"},
		{Rule{Algorithm: Credits, Limit: 1, History: 2}, "history is a calendar quota's"},
		{Rule{Algorithm: Credits, Refill: Refill{To: 1, Add: 1, Every: Day}}, "refill has both to (1) and add (1)"},
		{Rule{Algorithm: Credits, Refill: Refill{To: 1}}, "refill has no period"},
		{Rule{Algorithm: Credits, Refill: Refill{Every: Day}}, "has neither to nor add"},
		{Rule{Algorithm: Credits, Refill: Refill{To: -1, Every: Day}}, "refill to -1"},
		{Rule{Algorithm: Credits, Location: loc}, "this credits rule has no refill: leave the time zone out"},
		{Rule{Algorithm: Credits, Refill: Refill{To: 1, Every: Day}, WeekStart: time.Monday}, "a week start is for a refill every week"},
		{Rule{Limit: 1, Window: time.Minute, Location: loc}, "a time zone, week start or history is for a calendar quota"},
		{Rule{Limit: 1, Window: time.Minute, Refill: Refill{To: 1, Every: Day}}, "refill and covers are a credits rule's"},
		{Rule{Limit: 1, Window: time.Minute, Algorithm: store.Periodic}, "a calendar quota is a rule with a period"},
	} {
		tt.rule.Name = "r"
		err := (&Policy{Name: "p", Rules: []Rule{tt.rule}}).Validate()
		if !errors.Is(err, ErrInvalidPolicy) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: got %v, want %q", tt.rule, err, tt.want)
		}
	}
	quota := Rule{Name: "m", By: []string{"k"}, Period: Month, Limit: 1}
	credits := Rule{Name: "c", By: []string{"k"}, Algorithm: Credits, Covers: "m"}
	for _, tt := range []struct {
		rules []Rule
		want  string
	}{
		{[]Rule{credits, quota}, `covers "m": the quota comes after the credits rule`},
		{[]Rule{{Name: "m", By: []string{"k"}, Limit: 1, Window: time.Minute}, credits}, "not a calendar quota"},
		{[]Rule{quota, {Name: "c", By: []string{"j"}, Algorithm: Credits, Covers: "m"}}, "give both the same by"},
		{[]Rule{quota, {Name: "c", By: []string{"k"}, Algorithm: Credits, Covers: "x"}}, "no rule of that name comes before it"},
		{[]Rule{quota, credits, {Name: "d", By: []string{"k"}, Algorithm: Credits, Covers: "m"}}, `rule "c" covers it already`},
		{[]Rule{{Name: "m", By: []string{"k"}, Period: Month, Limit: 1, Shadow: true}, credits}, "cannot be shadow"},
	} {
		err := (&Policy{Name: "p", Rules: tt.rules}).Validate()
		if !errors.Is(err, ErrInvalidPolicy) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: got %v, want %q", tt.rules, err, tt.want)
		}
	}
}

// TestQuotaResolve checks the checks of calendar quotas and credits: their
// calendar, history, refill, window and the index of the quota a credits
// check covers, counted among the checks of the rules that apply.
func TestQuotaResolve(t *testing.T) {
	t.Parallel()
	loc := berlin(t)
	p := apiPlan(t)
	p.Rules[0].Optional, p.Rules[0].By = true, []string{"ip"} // applies only with an ip
	p.Rules[0].Limit = 1_000_000
	st := &localStore{}
	lim := NewLimiter(st, Config{})
	ctx := context.Background()
	for _, tt := range []struct {
		attrs  map[string]string
		covers int
	}{
		{map[string]string{"key": "k1", "ip": "a"}, 2},
		{map[string]string{"key": "k1"}, 1},
	} {
		// More than the quota's limit: its credits may pay for it.
		if _, err := lim.AllowN(ctx, p, tt.attrs, 100_001); err != nil {
			t.Fatal(err)
		}
		n := len(st.last.Checks)
		m, c := st.last.Checks[n-2], st.last.Checks[n-1]
		sameCal := func(c store.Calendar) bool {
			return c.Period == Month && c.Location.String() == loc.String() && c.WeekStart == 0
		}
		if m.Algorithm != store.Periodic || !sameCal(m.Calendar) || m.History != 12 || m.Window != store.MaxPeriodLength || m.Limit != 100_000 || m.Cost != 100_001 {
			t.Errorf("%v: the quota's check: %+v", tt.attrs, m)
		}
		if c.Algorithm != store.Credits || !sameCal(c.Calendar) || c.Refill != (store.Refill{To: 500}) || c.Window != time.Microsecond ||
			c.Limit != 500 || c.Covers != tt.covers || c.Values[0] != "k1" {
			t.Errorf("%v: the credits' check: %+v, want covers %d", tt.attrs, c, tt.covers)
		}
	}
	// A quota no credits cover: a cost over its limit can never fit.
	q := &Policy{Name: "q", Rules: []Rule{{Name: "daily", Period: Day, Limit: 5}}}
	if _, err := lim.AllowN(ctx, q, nil, 6); !errors.Is(err, ErrCostExceedsLimit) {
		t.Errorf("6 on a daily quota of 5: %v, want ErrCostExceedsLimit", err)
	}
	if d, err := lim.AllowN(ctx, q, nil, 5); err != nil || !d.Allowed || st.last.Checks[0].Calendar.Period != Day {
		t.Errorf("5 on a daily quota of 5: %+v, %v", d, err)
	}
	// A balance may be topped up past its starting Limit.
	c := &Policy{Name: "c", Rules: []Rule{{Name: "credits", Algorithm: Credits, Limit: 5}}}
	if _, err := lim.AllowN(ctx, c, nil, 50); err != nil || st.last.Checks[0].Algorithm != store.Credits {
		t.Errorf("50 on credits starting at 5: %v, %+v", err, st.last.Checks)
	}
	// Credits whose quota does not apply are not checked.
	m := apiPlan(t)
	m.Rules[1].Match = map[string]string{"plan": "metered"}
	if _, err := lim.Allow(ctx, m, map[string]string{"key": "k", "plan": "free"}); err != nil || len(st.last.Checks) != 1 || st.last.Checks[0].Rule != "per-second" {
		t.Errorf("a plan the quota does not match: %v, checks %+v, want per-second alone", err, st.last.Checks)
	}
	// The Overrides' Limit is the quota's and the balance's.
	o := apiPlan(t)
	o.Rules[1].Overrides = []Override{{Match: map[string]string{"plan": "pro"}, Limit: 1_000_000}}
	o.Rules[2].Overrides = []Override{{Match: map[string]string{"plan": "pro"}, Limit: 5000}}
	if _, err := lim.Allow(ctx, o, map[string]string{"key": "k", "plan": "pro"}); err != nil || st.last.Checks[1].Limit != 1_000_000 || st.last.Checks[2].Limit != 5000 {
		t.Errorf("a pro plan: %v, checks %+v", err, st.last.Checks)
	}
}

// TestQuotaCovered combines the results of a covered quota and its
// credits as the store gives them: the credits decide in the quota's
// place.
func TestQuotaCovered(t *testing.T) {
	t.Parallel()
	req := &store.Request{Policy: "api", Checks: []store.Check{
		{Rule: "per-second", Limit: 10, Window: time.Second, Cost: 1},
		{Rule: "monthly", Algorithm: store.Periodic, Limit: 100, Window: store.MaxPeriodLength, Cost: 1},
		{Rule: "overage", Algorithm: store.Credits, Limit: 500, Window: time.Microsecond, Cost: 1, Covers: 2},
	}}
	// The quota's next period, or the credits' next refill, whichever
	// comes first, admits the request again.
	month, refill := 10*time.Hour, 20*time.Hour
	for _, tt := range []struct {
		name              string
		quota, credits    store.Result
		allowed           bool
		deniedBy          string
		cause             Cause
		remaining         int64
		retry, creditWait time.Duration
	}{
		{name: "the quota has room",
			quota: store.Result{Fits: true, Used: 60, Remaining: 40}, credits: store.Result{Fits: true, Remaining: 500},
			allowed: true, remaining: 9},
		{name: "near the quota's end",
			quota: store.Result{Fits: true, Used: 99, Remaining: 1}, credits: store.Result{Fits: true, Remaining: 3},
			allowed: true, remaining: 4},
		{name: "credits pay",
			quota:   store.Result{Fits: false, Cause: store.CauseLimit, Used: 101, Remaining: 0, RetryAfter: month},
			credits: store.Result{Fits: true, Remaining: 499}, allowed: true, remaining: 9},
		{name: "neither has room",
			quota:    store.Result{Fits: false, Cause: store.CauseLimit, Used: 120, RetryAfter: month},
			credits:  store.Result{Fits: false, Cause: store.CauseCredits, Remaining: 0, RetryAfter: refill},
			deniedBy: "overage", cause: CauseCredits, retry: month, creditWait: month},
		{name: "the refill comes first",
			quota:    store.Result{Fits: false, Cause: store.CauseLimit, Used: 120, RetryAfter: refill},
			credits:  store.Result{Fits: false, Cause: store.CauseCredits, Remaining: 0, RetryAfter: month},
			deniedBy: "overage", cause: CauseCredits, retry: month, creditWait: month},
	} {
		req.Results = []store.Result{{Fits: true, Used: 1, Remaining: 9}, tt.quota, tt.credits}
		d := newDecision(req, nil)
		if d.Allowed != tt.allowed || d.DeniedBy != tt.deniedBy || d.Cause != tt.cause || d.Remaining != tt.remaining || d.RetryAfter != tt.retry {
			t.Errorf("%s: allowed %v denied by %q (%q) remaining %d retry %v; want %v %q (%q) %d %v", tt.name,
				d.Allowed, d.DeniedBy, d.Cause, d.Remaining, d.RetryAfter, tt.allowed, tt.deniedBy, tt.cause, tt.remaining, tt.retry)
		}
		if got := d.Limits()[2].RetryAfter; got != tt.creditWait {
			t.Errorf("%s: the credits' retry after %v, want %v", tt.name, got, tt.creditWait)
		}
		if q := d.Limits()[1]; q.Fits != tt.quota.Fits || (!q.Fits && q.Cause != CauseLimit) {
			t.Errorf("%s: the quota's status %+v keeps the store's fit and cause", tt.name, q)
		}
	}
}

// TestDecideQuotaChecks: Limiter.Decide takes calendar and credits checks,
// and refuses those that cannot be decided.
func TestDecideQuotaChecks(t *testing.T) {
	t.Parallel()
	lim := NewLimiter(&localStore{}, Config{})
	month := store.Calendar{Period: Month}
	quota := store.Check{Rule: "m", Algorithm: store.Periodic, Calendar: month, Limit: 5, Window: store.MaxPeriodLength, Cost: 1}
	credits := store.Check{Rule: "c", Algorithm: store.Credits, Limit: 5, Window: time.Microsecond, Cost: 9, Covers: 1}
	if _, err := lim.Decide(context.Background(), &store.Request{Policy: "p", Checks: []store.Check{quota, credits}}); err != nil {
		t.Fatal(err)
	}
	over := quota
	over.Cost = 6
	if _, err := lim.Decide(context.Background(), &store.Request{Policy: "p", Checks: []store.Check{over}}); !errors.Is(err, ErrCostExceedsLimit) {
		t.Errorf("6 on a quota of 5 no credits cover: %v", err)
	}
	if _, err := lim.Decide(context.Background(), &store.Request{Policy: "p", Checks: []store.Check{over, credits}}); err != nil {
		t.Errorf("6 on a quota of 5 that credits cover: %v", err)
	}
	bad := func(f func(q, c *store.Check)) []store.Check {
		q, c := quota, credits
		f(&q, &c)
		return []store.Check{q, c}
	}
	for name, checks := range map[string][]store.Check{
		"a quota without a period":  bad(func(q, _ *store.Check) { q.Calendar = store.Calendar{} }),
		"a quota's long window":     bad(func(q, _ *store.Check) { q.Window = store.MaxPeriodLength + 1 }),
		"a quota's history":         bad(func(q, _ *store.Check) { q.History = MaxHistory + 1 }),
		"a quota budgeted":          bad(func(q, _ *store.Check) { q.Budget = time.Second }),
		"covers itself":             bad(func(_, c *store.Check) { c.Covers = 2 }),
		"covers a log":              bad(func(q, _ *store.Check) { q.Algorithm, q.Calendar, q.Window = Log, store.Calendar{}, time.Minute }),
		"a refill without a period": bad(func(_, c *store.Check) { c.Refill.To = 5 }),
		"a period without a refill": bad(func(_, c *store.Check) { c.Calendar = month }),
		"a refill both ways":        bad(func(_, c *store.Check) { c.Calendar, c.Refill = month, store.Refill{To: 1, Add: 1} }),
		"a log with a calendar":     {{Rule: "l", Limit: 1, Window: time.Second, Cost: 1, Calendar: month}},
	} {
		if _, err := lim.Decide(context.Background(), &store.Request{Policy: "p", Checks: checks}); !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("%s: %v, want ErrInvalidPolicy", name, err)
		}
	}
}

// ledger is a store.Local that keeps credits (store.Crediter) and usage
// (store.Historian) as a test's figures: it records the requests it got
// and answers with what it was told.
type ledger struct {
	localStore
	credit  store.CreditRequest
	usage   store.UsageRequest
	periods []store.PeriodUsage
	err     error
}

func (s *ledger) Credit(_ context.Context, req *store.CreditRequest) error {
	if s.err != nil {
		return s.err
	}
	req.Balance, req.Applied, req.NextRefill = 42, req.Op != store.CreditGet, time.Hour
	s.credit = *req
	return nil
}

func (s *ledger) Usage(_ context.Context, req *store.UsageRequest) error {
	if s.err != nil {
		return s.err
	}
	req.Periods = append(req.Periods[:0], s.periods...)
	s.usage = *req
	return nil
}

// TestCreditsCalls: Credits, AddCredits and SetCredits send the store the
// credits rule's check for the key, with the policy's shared values, and
// refuse bad input before the store sees it.
func TestCreditsCalls(t *testing.T) {
	t.Parallel()
	st := &ledger{}
	lim := NewLimiter(st, Config{})
	ctx := context.Background()
	p := apiPlan(t)
	attrs := map[string]string{"key": "k1"}
	b, err := lim.AddCredits(ctx, p, "", attrs, 1000, "purchase-1")
	if err != nil {
		t.Fatal(err)
	}
	if b != (Balance{Balance: 42, Applied: true, NextRefill: time.Hour}) {
		t.Errorf("balance %+v", b)
	}
	c := st.credit
	if c.Policy != "api" || len(c.Shared) != 1 || c.Shared[0] != "k1" || c.Check.Rule != "overage" || c.Check.Algorithm != store.Credits ||
		c.Check.Limit != 500 || c.Check.Refill != (store.Refill{To: 500}) || c.Check.Calendar.Period != Month || c.Op != store.CreditAdd || c.Amount != 1000 || c.ID != "purchase-1" {
		t.Errorf("the store's request: %+v", c)
	}
	if _, err := lim.SetCredits(ctx, p, "overage", attrs, -5, ""); err != nil || st.credit.Op != store.CreditSet || st.credit.Amount != -5 {
		t.Errorf("set: %v, %+v", err, st.credit)
	}
	if b, err := lim.Credits(ctx, p, "overage", attrs); err != nil || b.Applied || st.credit.Op != store.CreditGet {
		t.Errorf("get: %+v, %v, %+v", b, err, st.credit)
	}
	var missing *MissingAttributeError
	for name, tt := range map[string]struct {
		call func() error
		want error
	}{
		"missing key":     {func() error { _, err := lim.Credits(ctx, p, "", nil); return err }, ErrMissingAttribute},
		"not credits":     {func() error { _, err := lim.Credits(ctx, p, "monthly", attrs); return err }, ErrInvalidPolicy},
		"no such rule":    {func() error { _, err := lim.Credits(ctx, p, "nope", attrs); return err }, ErrInvalidPolicy},
		"add 0":           {func() error { _, err := lim.AddCredits(ctx, p, "", attrs, 0, ""); return err }, ErrInvalidCredit},
		"add past 2^53":   {func() error { _, err := lim.AddCredits(ctx, p, "", attrs, MaxCost+1, ""); return err }, ErrInvalidCredit},
		"set below -2^53": {func() error { _, err := lim.SetCredits(ctx, p, "", attrs, -MaxCost-1, ""); return err }, ErrInvalidCredit},
		"a long id": {func() error {
			_, err := lim.AddCredits(ctx, p, "", attrs, 1, strings.Repeat("x", store.MaxCreditID+1))
			return err
		}, ErrInvalidCredit},
		"no credits rule": {func() error { _, err := lim.Credits(ctx, one(), "", nil); return err }, ErrInvalidPolicy},
	} {
		st.credit = store.CreditRequest{}
		err := tt.call()
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", name, err, tt.want)
		}
		if st.credit.Policy != "" {
			t.Errorf("%s: the store was called", name)
		}
		if tt.want == ErrMissingAttribute && (!errors.As(err, &missing) || missing.Attribute != "key") {
			t.Errorf("%s: %v does not name the attribute", name, err)
		}
	}
	two := apiPlan(t)
	two.Rules = append(two.Rules, Rule{Name: "more", By: []string{"key"}, Algorithm: Credits})
	if _, err := lim.Credits(ctx, two, "", attrs); !errors.Is(err, ErrInvalidPolicy) || !strings.Contains(err.Error(), "(overage, more); name one") {
		t.Errorf("two credits rules, none named: %v", err)
	}
	// A store failure is an error; a store that keeps no balances too.
	st.err = errors.New("down")
	if _, err := lim.AddCredits(ctx, p, "", attrs, 1, ""); err == nil || err.Error() != "down" {
		t.Errorf("a failing store: %v", err)
	}
	if _, err := NewLimiter(&localStore{}, Config{}).Credits(ctx, p, "", attrs); err == nil || !strings.Contains(err.Error(), "keeps no credits balances") {
		t.Errorf("a store without credits: %v", err)
	}
}

// one returns a policy of one rate rule.
func one() *Policy {
	return &Policy{Name: "one", Rules: []Rule{{Name: "r", Limit: 1, Window: time.Second}}}
}

// TestUsageCall: Usage sends the quota's check and gives its periods in
// the rule's time zone.
func TestUsageCall(t *testing.T) {
	t.Parallel()
	loc := berlin(t)
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, loc)
	feb := time.Date(2026, 2, 1, 0, 0, 0, 0, loc)
	mar := time.Date(2026, 3, 1, 0, 0, 0, 0, loc)
	st := &ledger{periods: []store.PeriodUsage{
		{Index: 2026*12 + 1, Start: feb.UnixMicro(), End: mar.UnixMicro(), Used: 7},
		{Index: 2026 * 12, Start: jan.UnixMicro(), End: feb.UnixMicro(), Used: 0},
	}}
	lim := NewLimiter(st, Config{})
	got, err := lim.Usage(context.Background(), apiPlan(t), "", map[string]string{"key": "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if u := st.usage; u.Policy != "api" || u.Check.Rule != "monthly" || u.Check.History != 12 || u.Check.Calendar.Period != Month || u.Check.Values[0] != "k1" {
		t.Errorf("the store's request: %+v", u)
	}
	want := []PeriodUsage{{Start: feb, End: mar, Used: 7}, {Start: jan, End: feb}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if !got[i].Start.Equal(want[i].Start) || !got[i].End.Equal(want[i].End) || got[i].Used != want[i].Used || got[i].Start.Location().String() != "Europe/Berlin" {
			t.Errorf("period %d: %+v, want %+v in Europe/Berlin", i, got[i], want[i])
		}
	}
	if _, err := lim.Usage(context.Background(), apiPlan(t), "overage", map[string]string{"key": "k1"}); !errors.Is(err, ErrInvalidPolicy) {
		t.Errorf("usage of a credits rule: %v", err)
	}
}

// TestCreditsNotCached: a denial by a policy with a credits rule is never
// answered from the deny cache, since a top-up may come at any time.
func TestCreditsNotCached(t *testing.T) {
	t.Parallel()
	st := &ledger{}
	lim := NewLimiter(st, Config{})
	p := &Policy{Name: "c", CacheDenials: true, Rules: []Rule{{Name: "credits", Algorithm: Credits, Limit: 0}}}
	for range 3 {
		if d, err := lim.Allow(context.Background(), p, nil); err != nil || d.Allowed || d.Cached {
			t.Fatalf("%+v, %v", d, err)
		}
	}
	if st := lim.DenyCacheStats(); st.Hits+st.Misses+uint64(st.Entries) != 0 {
		t.Errorf("deny cache %+v, want it untouched", st)
	}
	q := &Policy{Name: "q", CacheDenials: true, Rules: []Rule{{Name: "daily", Period: Day, Limit: 0}}}
	for range 2 {
		if _, err := lim.Allow(context.Background(), q, nil); err != nil {
			t.Fatal(err)
		}
	}
	if st := lim.DenyCacheStats(); st.Hits != 1 {
		t.Errorf("deny cache %+v, want the calendar quota's second denial a hit", st)
	}
}

// TestQuotaOverLimitHook: a cost recorded above a rule's limit is told to
// the OnOverLimit hook for a calendar quota no credits cover, and not for
// a balance or a quota credits cover, which may take it.
func TestQuotaOverLimitHook(t *testing.T) {
	t.Parallel()
	var told []string
	lim := NewLimiter(&localStore{}, Config{hooks: hooks.Hooks{OnOverLimit: func(_ string, c *store.Check, _ int64) { told = append(told, c.Rule) }}})
	p := &Policy{Name: "p", Rules: []Rule{
		{Name: "daily", Period: Day, Limit: 5},
		{Name: "monthly", Period: Month, Limit: 5},
		{Name: "overage", Algorithm: Credits, Limit: 5, Covers: "monthly"},
	}}
	if _, err := lim.Record(context.Background(), p, nil, 6); err != nil {
		t.Fatal(err)
	}
	if len(told) != 1 || told[0] != "daily" {
		t.Errorf("the hook was told of %q, want daily alone", told)
	}
}
