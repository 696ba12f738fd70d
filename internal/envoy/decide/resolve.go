package decide

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/store"
)

// plan is a request resolved against the configuration: what each of its
// descriptors matched, and the windows the store is asked about.
type plan struct {
	req     *rlsv3.RateLimitRequest
	domain  string
	results []DescriptorResult
	items   []*item // per descriptor; nil when no limit applies
	windows []pending

	// main decides the windows that count hits, peeks those of
	// descriptors whose hits_addend is 0.
	main, peeks store.Request

	// refunded reports that a window can never fit the hits, so main only
	// reports the others' figures, recording nothing (under AllOrNothing).
	refunded bool
}

// item is one descriptor of a request that limits apply to.
type item struct {
	own      bool             // a descriptor's own limit, not the configuration's
	metadata *structpb.Struct // the matched descriptor's metadata
	limits   []envoy.Limit    // the limits that apply (replaced ones removed)
	rules    []string         // per limit: the rule naming its window
	values   []string         // the values naming its windows
	checks   []int            // per limit: its index in the windows
	hits     uint64
	shadow   bool // shadow_mode: over the limit answers OK
	quota    bool // quota_mode: over the limit answers OVER_LIMIT only with every other quota descriptor
}

// pending is one window a request must fit, before it is sent.
type pending struct {
	check      store.Check
	impossible bool // the hits are more than the limit: it can never fit
	peek       bool // hits_addend 0: reported, not counted
	overridden bool // a runtime override set the check's figures
	final      int  // index in the store request sent, -1 when not sent
}

// resolve matches req's descriptors and makes the windows of the limits
// that apply, descriptors that name one window adding their hits to it.
func resolve(c *envoy.Config, req *rlsv3.RateLimitRequest, opts Options) (*plan, error) {
	domain := req.GetDomain()
	if domain == "" {
		return nil, fmt.Errorf("%w: rate limit domain must not be empty; Envoy's rate-limit filter sends its domain", ErrBadRequest)
	}
	descs := req.GetDescriptors()
	if len(descs) == 0 {
		return nil, fmt.Errorf("%w: rate limit descriptor list must not be empty", ErrBadRequest)
	}
	p := &plan{req: req, domain: domain, results: make([]DescriptorResult, len(descs)), items: make([]*item, len(descs))}
	replaced := map[string]bool{}
	for i, d := range descs {
		if err := resolveDescriptor(c, p, i, d, req.GetHitsAddend(), opts.QuotaMode, replaced); err != nil {
			return nil, err
		}
	}
	p.dropReplaced(replaced)
	p.makeWindows()
	p.applyOverrides(opts.Overrides)
	p.makeRequests(opts)
	return p, nil
}

// resolveDescriptor makes the item of descriptor i, d, noting the limits its matched limits replace;
// quota puts it in quota_mode.
func resolveDescriptor(c *envoy.Config, p *plan, i int, d *ratelimitv3.RateLimitDescriptor, hitsAddend uint32, quota bool, replaced map[string]bool) error {
	if d.GetIsNegativeHits() {
		return fmt.Errorf("%w: descriptor %d asks for negative hits, which sluice does not take back; send hits to add", ErrBadRequest, i+1)
	}
	hits := uint64(max(1, hitsAddend))
	if h := d.GetHitsAddend(); h != nil {
		hits = h.GetValue()
	}
	if hits > sluice.MaxCost {
		return fmt.Errorf("%w: descriptor %d has hits_addend %d; hits are 0 to 2^53 (%d)", ErrBadRequest, i+1, hits, uint64(sluice.MaxCost))
	}
	res := &p.results[i]
	res.Hits = hits
	if o := d.GetLimit(); o != nil {
		u := rlsv3.RateLimitResponse_RateLimit_Unit(o.GetUnit())
		l, ok := c.UnitLimit(u, o.GetRequestsPerUnit())
		if !ok {
			return fmt.Errorf("%w: descriptor %d's own limit has unit %v; use SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR", ErrBadRequest, i+1, u)
		}
		p.items[i] = &item{own: true, hits: hits, limits: []envoy.Limit{l},
			rules: []string{ownRule(u)}, values: entryValues(d.GetEntries()), quota: quota}
		res.Stat = descriptorKey(p.domain, d.GetEntries())
		return nil
	}
	m := c.Match(p.domain, d.GetEntries())
	if !m.Found {
		return nil
	}
	res.Stat = m.Stat
	for _, l := range m.Limits {
		for _, r := range l.Replaces {
			replaced[r] = true
		}
	}
	if m.Unlimited {
		res.Outcome = Unlimited
		return nil
	}
	p.items[i] = &item{metadata: m.Metadata, limits: m.Limits, rules: m.Rules, values: m.Values, hits: hits,
		shadow: m.Shadow, quota: m.Quota || quota}
	return nil
}

// ownRule names the window of a descriptor's own limit of unit u.
func ownRule(u rlsv3.RateLimitResponse_RateLimit_Unit) string {
	return "limit/" + strings.ToLower(u.String())
}

// entryValues are a descriptor's keys and values, one after the other: the
// values naming the window of its own limit.
func entryValues(entries []*ratelimitv3.RateLimitDescriptor_Entry) []string {
	var values []string
	for _, e := range entries {
		values = append(values, e.GetKey(), e.GetValue())
	}
	return values
}

// dropReplaced removes the named limits that another matched limit
// replaces; a descriptor left with none has no limit.
func (p *plan) dropReplaced(replaced map[string]bool) {
	if len(replaced) == 0 {
		return
	}
	for i, it := range p.items {
		if it == nil || it.own {
			continue
		}
		var limits []envoy.Limit
		var rules []string
		for j, l := range it.limits {
			if l.Name == "" || !replaced[l.Name] {
				limits, rules = append(limits, l), append(rules, it.rules[j])
			}
		}
		if len(limits) == 0 {
			p.items[i] = nil
			p.results[i].Stat = ""
			continue
		}
		it.limits, it.rules = limits, rules
	}
}

// makeWindows makes one window per limit, descriptors that name the same
// window adding their hits to one.
func (p *plan) makeWindows() {
	index := map[string]int{}
	for _, it := range p.items {
		if it == nil {
			continue
		}
		it.checks = make([]int, len(it.limits))
		for j, l := range it.limits {
			peek := it.hits == 0
			id := strconv.FormatBool(peek) + "\x00" + it.rules[j] + "\x00" + strings.Join(it.values, "\x00")
			if k, ok := index[id]; ok {
				c := &p.windows[k].check.Cost // each at most MaxCost: the sum saturates, as its window would
				*c = min(*c+int64(it.hits), sluice.MaxCost)
				it.checks[j] = k
				continue
			}
			ch := check(&l, it.rules[j], it.values, int64(it.hits))
			if peek {
				ch.Cost = 1
			}
			// A quota window denies nothing by itself. A peek's window is
			// never shadow: its figures are then those before the hit.
			ch.Shadow = (it.shadow || it.quota) && !peek
			index[id] = len(p.windows)
			it.checks[j] = len(p.windows)
			p.windows = append(p.windows, pending{check: ch, peek: peek, final: -1})
		}
	}
}

// check is the store check of l's window rule with values, of cost.
func check(l *envoy.Limit, rule string, values []string, cost int64) store.Check {
	ch := store.Check{Rule: rule, Values: values, Limit: int64(l.Requests), Window: l.Window, Algorithm: l.Algorithm, Cost: cost, Budget: l.Budget}
	if l.Period != store.NoPeriod {
		// A calendar period in UTC; weeks start on Monday (ISO 8601).
		ch.Algorithm = store.Periodic
		ch.Calendar = store.Calendar{Period: l.Period, WeekStart: time.Monday}
		return ch
	}
	if l.Requests == 0 {
		ch.Algorithm = sluice.Log // a limit of 0 blocks; GCRA has no empty bucket
	}
	if ch.Algorithm == sluice.GCRA {
		ch.Burst = ch.Limit
	}
	return ch
}

// makeRequests sorts the windows into the main request and the peeks.
// Under AllOrNothing a window the hits can never fit is sent in neither,
// and denies the request whatever the others say: main then asks for their
// figures without recording. PerDescriptor records it too, over its limit,
// as envoyproxy/ratelimit does (a cost counted after the response).
func (p *plan) makeRequests(opts Options) {
	p.main = store.Request{Policy: envoy.PolicyName(p.domain), Mode: store.ModeAllow, DryRun: opts.DryRun}
	if opts.Counting == PerDescriptor {
		p.main.Mode = store.ModeRecord
	}
	p.peeks = store.Request{Policy: envoy.PolicyName(p.domain), DryRun: true}
	denied := false
	for k := range p.windows {
		w := &p.windows[k]
		c := &w.check
		switch {
		case c.Limit > 0 && c.Cost > c.Limit && p.main.Mode == store.ModeAllow:
			w.impossible = true
			denied = denied || !c.Shadow
		case w.peek:
			w.final = len(p.peeks.Checks)
			p.peeks.Checks = append(p.peeks.Checks, *c)
		default:
			w.final = len(p.main.Checks)
			p.main.Checks = append(p.main.Checks, *c)
		}
	}
	p.refunded = denied && p.main.Mode == store.ModeAllow && !p.main.DryRun
	if p.refunded {
		p.main.DryRun = true
	}
}

// descriptorKey is envoyproxy/ratelimit's key of a descriptor that carries
// its own limit: "domain.key_value.key2_value2".
func descriptorKey(domain string, entries []*ratelimitv3.RateLimitDescriptor_Entry) string {
	var b strings.Builder
	b.WriteString(domain)
	for _, e := range entries {
		b.WriteByte('.')
		b.WriteString(e.GetKey())
		if e.GetValue() != "" {
			b.WriteByte('_')
			b.WriteString(e.GetValue())
		}
	}
	return b.String()
}
