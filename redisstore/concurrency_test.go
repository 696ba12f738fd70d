package redisstore_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/redisstore"
)

const (
	helperProcs      = 8
	helperGoroutines = 32
	helperAttempts   = 16 // per goroutine, at most
	globalLimit      = 100
	categoryLimit    = 10
	categories       = 20
	hour             = time.Hour
)

// hierarchy is the policy every process hammers: a global cap over a
// per-category cap, both over an hour, on Redis's clock.
func hierarchy() *sluice.Policy {
	return &sluice.Policy{Name: "notify", Rules: []sluice.Rule{
		{Name: "global", Limit: globalLimit, Window: hour},
		{Name: "category", Limit: categoryLimit, Window: hour, By: []string{"category"}},
	}}
}

// admission is one event a child reports as admitted, with the wall clock
// read just before and just after its decision.
type admission struct {
	category      string
	before, after int64 // µs
}

// TestMultiProcess runs 8 copies of this test binary, each deciding with 32
// goroutines against one policy on the package's server, with Redis's own
// clock. Exactly the limits must be admitted, with every admitted event in
// every window of its policy and in no other.
func TestMultiProcess(t *testing.T) {
	server.Require(t)
	prefix := newPrefix()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var admitted []admission
	runChildren(t, ctx, helperProcs, "TestHelperProcess",
		[]string{helperEnv + "=" + server.Addr(), helperPrefixEnv + "=" + prefix},
		func(i int, line string) {
			if !strings.HasPrefix(line, "admit ") {
				return
			}
			f := strings.Fields(line)
			if len(f) != 4 {
				t.Fatalf("child %d: bad line %q", i, line)
			}
			before, err1 := strconv.ParseInt(f[2], 10, 64)
			after, err2 := strconv.ParseInt(f[3], 10, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("child %d: bad line %q", i, line)
			}
			admitted = append(admitted, admission{category: f[1], before: before, after: after})
		})

	// What the children saw.
	perCategory := map[string][]admission{}
	for _, a := range admitted {
		perCategory[a.category] = append(perCategory[a.category], a)
	}
	if len(admitted) != globalLimit {
		t.Errorf("children admitted %d events, want exactly %d", len(admitted), globalLimit)
	}
	for c, as := range perCategory {
		if len(as) > categoryLimit {
			t.Errorf("category %s: children admitted %d, limit %d", c, len(as), categoryLimit)
		}
	}

	// What Redis holds.
	rc := admin(t)
	store, err := redisstore.New(redisstore.Config{Addrs: []string{server.Addr()}, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	p := hierarchy()
	keysOf := func(category string) []string {
		return store.Keys(request(t, p, map[string]string{"category": category}, 1))
	}
	global := timestamps(entries(t, rc, keysOf("c0")[0]))
	checkWindows(t, "global", global, hour, globalLimit)
	if len(global) != globalLimit {
		t.Errorf("global window holds %d entries, want %d", len(global), globalLimit)
	}
	var union []int64
	for i := range categories {
		c := fmt.Sprintf("c%d", i)
		ts := timestamps(entries(t, rc, keysOf(c)[1]))
		checkWindows(t, "category "+c, ts, hour, categoryLimit)
		if !matches(perCategory[c], ts) {
			t.Errorf("category %s: Redis holds entries at %v; the children's admissions (%d) do not match them one to one within their calls",
				c, ts, len(perCategory[c]))
		}
		union = append(union, ts...)
	}
	// All or none: every category entry is also a global entry, at the
	// same microsecond.
	slices.Sort(union)
	if !slices.Equal(union, global) {
		t.Errorf("the category windows' entries (%d) differ from the global window's (%d)", len(union), len(global))
	}
	t.Logf("%d processes x %d goroutines: %d admitted over %d categories", helperProcs, helperGoroutines, len(admitted), len(perCategory))
}

// TestHelperProcess is a child of TestMultiProcess; run directly, it does
// nothing.
func TestHelperProcess(t *testing.T) {
	addr := os.Getenv(helperEnv)
	if addr == "" {
		return
	}
	s, err := redisstore.New(redisstore.Config{Addrs: []string{addr}, Prefix: os.Getenv(helperPrefixEnv)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// 256 goroutines on a small machine: a deadline well past the default
	// 50 ms, so that every decision is Redis's, not the failure policy's.
	lim := sluice.NewLimiter(s, sluice.Config{Timeout: 10 * time.Second})
	p := hierarchy()
	ctx := context.Background()

	childMain(t, func() (string, bool, error) {
		c := fmt.Sprintf("c%d", rand.IntN(categories))
		before := time.Now().UnixMicro()
		d, err := lim.Allow(ctx, p, map[string]string{"category": c})
		after := time.Now().UnixMicro()
		switch {
		case err != nil:
			return "", false, err
		case d.Allowed:
			return fmt.Sprintf("admit %s %d %d", c, before, after), false, nil
		}
		return "", d.DeniedBy == "global", nil
	})
}

// timestamps returns the time of every event es record, an entry of cost
// n being n events at its time.
func timestamps(es []entry) []int64 {
	var out []int64
	for _, e := range es {
		for range e.Cost {
			out = append(out, e.Score)
		}
	}
	slices.Sort(out)
	return out
}

// checkWindows reports any window (t-w, t] holding more than limit of the
// sorted timestamps ts.
func checkWindows(t *testing.T, what string, ts []int64, w time.Duration, limit int) {
	t.Helper()
	wµs := w.Microseconds()
	lo := 0
	for hi, end := range ts {
		for ts[lo] <= end-wµs {
			lo++
		}
		if n := hi - lo + 1; n > limit {
			t.Errorf("%s: %d entries in the window ending at %d µs, limit %d", what, n, end, limit)
			return
		}
	}
}

// matches reports whether each admission can be given its own timestamp
// from ts that lies within the admission's call: the earliest-ending call
// takes the earliest timestamp it can.
func matches(as []admission, ts []int64) bool {
	if len(as) != len(ts) {
		return false
	}
	as = slices.Clone(as)
	slices.SortFunc(as, func(a, b admission) int { return cmp.Compare(a.after, b.after) })
	used := make([]bool, len(ts))
	for _, a := range as {
		found := false
		for i, x := range ts {
			if !used[i] && a.before <= x && x <= a.after {
				used[i], found = true, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
