package main

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // the calendar rule's time zone, on a machine without a zone database

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/redisstore"
)

// The rows of a calendar quota and a credits balance, beside the sliding
// counter's in the redis and instructions sections: the one key each keeps
// per window must cost Redis no more per decision than the sliding
// counter's one string key, and quotaVerdict says whether it does.

// quotaLocation is the calendar rule's time zone: one with daylight saving,
// as a plan's customers have.
var quotaLocation = func() *time.Location {
	l, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		panic(err) // time/tzdata holds it
	}
	return l
}()

// Names of the contenders quotaVerdict compares.
const (
	slidingCounterRow = "sluice sliding-counter"
	calendarRow       = "sluice calendar (month, history 12)"
	creditsRow        = "sluice credits (refilled monthly)"
)

// calendarPolicy is onePolicy as a calendar quota: a count per key and
// month in Europe/Berlin, keeping 12 months of history, at a limit no run
// reaches, so that every decision is admitted and writes, as the sliding
// counter's do.
func calendarPolicy() *sluice.Policy {
	return &sluice.Policy{Name: "bench-calendar", Rules: []sluice.Rule{
		{Name: "per-key", Limit: 100_000_000, By: []string{"key"}, Period: sluice.Month, Location: quotaLocation, History: 12},
	}}
}

// creditsPolicy is a credits balance per key that every decision draws by
// its cost, starting at and refilled monthly to an amount no run spends.
func creditsPolicy() *sluice.Policy {
	const balance = 100_000_000
	return &sluice.Policy{Name: "bench-credits", Rules: []sluice.Rule{
		{Name: "per-key", Algorithm: sluice.Credits, Limit: balance, By: []string{"key"},
			Location: quotaLocation, Refill: sluice.Refill{To: balance, Every: sluice.Month}},
	}}
}

// quotaVerdict returns a line that compares the calendar and credits rows
// with the sliding counter's and says whether each costs no more; "" when
// the sliding counter or both quota rows were not run. figures holds, by
// contender name, what a decision cost in each round (shown with prec
// decimals; NaN for a round the contender did not complete). A quota row's
// ratio is the median over the rounds both completed of its figure over
// the sliding counter's in the same round: the contenders take turns, so a
// round's ratio sees one state of a shared machine. The figures shown are
// each contender's median round.
func quotaVerdict(what string, prec int, figures map[string][]float64) string {
	base := median(figures[slidingCounterRow])
	if math.IsNaN(base) || base <= 0 {
		return ""
	}
	var parts []string
	verdict := "yes"
	for _, name := range []string{calendarRow, creditsRow} {
		var ratios []float64
		for r, f := range figures[name] {
			if r < len(figures[slidingCounterRow]) && figures[slidingCounterRow][r] > 0 {
				ratios = append(ratios, f/figures[slidingCounterRow][r])
			}
		}
		ratio := median(ratios)
		if math.IsNaN(ratio) {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.*f (%.2f×)", name, prec, median(figures[name]), ratio))
		if ratio > 1 {
			verdict = "NO"
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("Calendar and credits rules, %s per decision against the sliding counter's %.*f: %s. At most the sliding counter's: %s.",
		what, prec, base, strings.Join(parts, "; "), verdict)
}

// median returns the median of the figures that are not NaN (the mean of
// the middle two of an even count); NaN when there are none.
func median(figures []float64) float64 {
	var xs []float64
	for _, f := range figures {
		if !math.IsNaN(f) {
			xs = append(xs, f)
		}
	}
	if len(xs) == 0 {
		return math.NaN()
	}
	slices.Sort(xs)
	if n := len(xs); n%2 == 0 {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
	return xs[len(xs)/2]
}

// printLine prints s and an empty line, nothing when s is empty.
func printLine(s string) {
	if s != "" {
		fmt.Printf("%s\n\n", s)
	}
}

// quotaMemory prints the Redis memory of a calendar quota's and a credits
// balance's keys per window: MEMORY USAGE summed over every key the
// windows wrote (whatever keys the store keeps for them), divided by the
// windows. The calendar rows run on the store's own clock, a month at a
// time, so that a window holds the totals of 12 months before the current
// one; the credits rows record the ids of top-ups.
func (b *bench) quotaMemory() {
	const keys, limit, ids = 1000, 100, 10
	names := keyNames(keys)
	// Short names, as the algorithms table's: a small key's name is much of it.
	calendar := func(history int) *sluice.Policy {
		return &sluice.Policy{Name: "a", Rules: []sluice.Rule{
			{Name: "r", Limit: limit, By: []string{"key"}, Period: sluice.Month, Location: quotaLocation, History: history},
		}}
	}
	credits := &sluice.Policy{Name: "a", Rules: []sluice.Rule{
		{Name: "r", Algorithm: sluice.Credits, Limit: limit, By: []string{"key"}, Location: quotaLocation, Refill: sluice.Refill{To: limit, Every: sluice.Month}},
	}}
	// The months start with the current one: keys expire on Redis's clock.
	now := time.Now().In(quotaLocation)
	month := func(i int) time.Time {
		return time.Date(now.Year(), now.Month()+time.Month(i), 2, 12, 0, 0, 0, quotaLocation)
	}
	type row struct {
		what   string
		months int // calendar months decided, each to the limit; 0 for credits
		p      *sluice.Policy
		ids    int // top-ups with an id per credits window
	}
	rows := []row{
		{what: "calendar quota, the current period only (`history: 0`)", months: 1, p: calendar(0)},
		{what: "calendar quota with 12 periods of history (`history: 12`, 13 months used)", months: 13, p: calendar(12)},
		{what: "credits balance", p: credits},
		{what: fmt.Sprintf("credits balance and the ids of %d top-ups", ids), p: credits, ids: ids},
	}
	fmt.Printf("### Calendar quotas and credits: Redis memory per window (%d windows each)\n\n", keys)
	fmt.Println("MEMORY USAGE (SAMPLES 0) of every key the windows wrote, over the windows, names counted (`s:{a,k0}…`).")
	fmt.Println()
	fmt.Println("| window | keys per window | Redis B/window |")
	fmt.Println("|---|---:|---:|")
	for _, r := range rows {
		b.adm.flush()
		var at time.Time
		s, err := redisstore.New(redisstore.Config{Addrs: []string{b.addr}, Prefix: "s", Clock: func() time.Time { return at }})
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: quota memory:", err)
			return
		}
		lim := sluice.NewLimiter(s, benchLimiterConfig)
		err = func() error {
			attrs := map[string]string{}
			for m := range max(r.months, 1) {
				at = month(m)
				for _, n := range names {
					attrs["key"] = n
					if r.months == 0 {
						if _, err := lim.AllowN(bgCtx, r.p, attrs, 1); err != nil {
							return err
						}
						for i := range r.ids {
							if _, err := lim.AddCredits(bgCtx, r.p, "r", attrs, 1, "order-"+strconv.Itoa(i)); err != nil {
								return err
							}
						}
						continue
					}
					if _, err := lim.AllowN(bgCtx, r.p, attrs, limit); err != nil {
						return err
					}
				}
			}
			return nil
		}()
		s.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: quota memory: %s: %v\n", r.what, err)
			continue
		}
		total, n := b.adm.memoryOfAll()
		fmt.Printf("| %s | %.1f | %.0f |\n", r.what, float64(n)/keys, float64(total)/keys)
	}
	fmt.Println()
}
