package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
	"github.com/sluicerate/sluice/storetest"
)

// The package's Redis Cluster, started by the first test that needs it and
// stopped by TestMain.
var (
	clusterOnce sync.Once
	cluster     *redistest.Cluster
	clusterErr  error
)

// sharedCluster returns the package's cluster, starting it on first use.
func sharedCluster(t testing.TB) *redistest.Cluster {
	t.Helper()
	clusterOnce.Do(func() { cluster, clusterErr = redistest.StartClusterMain() })
	if clusterErr != nil {
		t.Fatal(clusterErr)
	}
	cluster.Require(t)
	return cluster
}

// stopTopologies stops what sharedCluster started.
func stopTopologies() {
	if cluster != nil {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
}

// openCluster opens a store in Cluster mode on the package's cluster.
func openCluster(t testing.TB, cfg redisstore.Config) *redisstore.Store {
	t.Helper()
	c := sharedCluster(t)
	cfg.Mode = redisstore.Cluster
	cfg.Addrs = c.Addrs()[:2]
	s, err := redisstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// clusterTTLs returns every key under prefix on the cluster's masters with
// its remaining time to live.
func clusterTTLs(c *redistest.Cluster, prefix string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for _, m := range c.Masters() {
		cursor := "0"
		for {
			r, err := m.Do("SCAN", cursor, "MATCH", prefix+":*", "COUNT", "1000")
			if err != nil {
				return nil, err
			}
			lines := strings.Split(r, "\n")
			cursor = lines[0]
			for _, k := range lines[1:] {
				if k == "" {
					continue
				}
				ms, err := m.Do("PTTL", k)
				if err != nil {
					return nil, err
				}
				n, _ := strconv.ParseInt(ms, 10, 64)
				if n == -2 {
					continue
				}
				out[k] = time.Duration(n) * time.Millisecond
			}
			if cursor == "0" {
				break
			}
		}
	}
	return out, nil
}

// TestClusterConformance runs the conformance suite over the Cluster store,
// whose default is SlotsPerRule: the cases with a global cap over per-key
// caps are cross-slot decisions.
func TestClusterConformance(t *testing.T) {
	storetest.Run(t, clusterOpener(sharedCluster(t)))
}

// TestClusterConformanceDenyCache runs the suite over the Cluster store with
// the Limiter's deny cache on.
func TestClusterConformanceDenyCache(t *testing.T) {
	storetest.RunDenyCache(t, clusterOpener(sharedCluster(t)))
}

// clusterOpener opens each case's store on c under a prefix of its own.
func clusterOpener(c *redistest.Cluster) storetest.Opener {
	return func(t *testing.T, now func() time.Time) storetest.Target {
		prefix := newPrefix()
		s := openCluster(t, redisstore.Config{Prefix: prefix, Clock: now})
		return storetest.Target{
			Store: s,
			TTLs: func(ctx context.Context) (map[string]time.Duration, error) {
				return clusterTTLs(c, prefix)
			},
		}
	}
}

// TestClusterKeysSpread checks the SlotsPerRule layout: per-user keys of
// one policy land on every master, and the global cap has a slot of its own.
func TestClusterKeysSpread(t *testing.T) {
	c := sharedCluster(t)
	s := openCluster(t, redisstore.Config{Prefix: newPrefix()})
	p := &sluice.Policy{Name: "api", Rules: []sluice.Rule{
		{Name: "global", Limit: 100, Window: time.Minute},
		{Name: "per-user", Limit: 10, Window: time.Minute, By: []string{"user"}},
	}}
	masters := map[string]int{}
	var global string
	for i := range 30 {
		ks := s.Keys(request(t, p, map[string]string{"user": fmt.Sprintf("u%d", i)}, 1))
		if global == "" {
			global = ks[0]
		} else if ks[0] != global {
			t.Fatalf("global key %q, then %q", global, ks[0])
		}
		if !strings.Contains(ks[1], fmt.Sprintf("{api,u%d}", i)) {
			t.Errorf("per-user key %q, want hash tag {api,u%d}", ks[1], i)
		}
		m, _, err := c.MasterOf(ks[1])
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Addr()]++
	}
	if !strings.Contains(global, "{api}") {
		t.Errorf("global key %q, want hash tag {api}", global)
	}
	if len(masters) != 3 {
		t.Errorf("30 users' keys on %d masters (%v), want all 3", len(masters), masters)
	}
	t.Logf("30 users' per-user keys over the masters: %v", masters)
}

// crossSlotEvaler runs every script with two more keys, in other slots, so
// that Redis answers CROSSSLOT.
type crossSlotEvaler struct{ c rueidis.Client }

func (e crossSlotEvaler) EvalSHA(ctx context.Context, sha1 string, keys, args []string) ([]int64, error) {
	return nil, redisstore.ErrNoScript
}

func (e crossSlotEvaler) Eval(ctx context.Context, script string, keys, args []string) ([]int64, error) {
	keys = append(keys, "{elsewhere}:x", "{another}:y")
	cmd := e.c.B().Eval().Script(script).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
	return e.c.Do(ctx, cmd).AsIntSlice()
}

// TestClusterCrossSlotIsError: a CROSSSLOT reply is an error from the store
// and a denial from a Limiter that fails closed, never an admission.
func TestClusterCrossSlotIsError(t *testing.T) {
	c := sharedCluster(t)
	// A plain connection to one node: the cluster client refuses to build
	// a cross-slot command at all, so only a node can answer CROSSSLOT.
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs()[:1], ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	s, err := redisstore.NewFromEvaler(crossSlotEvaler{client}, redisstore.Config{Prefix: newPrefix()})
	if err != nil {
		t.Fatal(err)
	}
	p := &sluice.Policy{Name: "x", Rules: []sluice.Rule{{Name: "r", Limit: 10, Window: time.Minute}}}
	req := request(t, p, nil, 1)
	if err := s.Decide(context.Background(), req); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("Decide = %v; want a CROSSSLOT error", err)
	}
	d, err := sluice.NewLimiter(s, sluice.Config{}).Allow(context.Background(), p, nil)
	if err == nil || d.Allowed || !d.Degraded {
		t.Fatalf("Limiter.Allow = %+v, %v; want a degraded denial with the error", d, err)
	}
	t.Logf("CROSSSLOT: store error %q; limiter decision allowed=%v degraded=%v", err, d.Allowed, d.Degraded)
}

// Environment of a TestClusterHelperProcess child, besides helperEnv (the
// seed addresses, comma-separated) and helperPrefixEnv.
const clusterPolicyEnv = "SLUICE_REDISSTORE_HELPER_POLICY"

// clusterPolicies are the policies the multi-process cluster test hammers:
// one spread over slots by user, and a global cap over it (cross-slot).
var clusterPolicies = map[string]*sluice.Policy{
	"per-user": {Name: "per-user", Rules: []sluice.Rule{
		{Name: "user", Limit: 5, Window: time.Hour, By: []string{"user"}},
	}},
	"global-per-user": {Name: "global-per-user", Rules: []sluice.Rule{
		{Name: "global", Limit: 100, Window: time.Hour},
		{Name: "user", Limit: 10, Window: time.Hour, By: []string{"user"}},
	}},
}

const clusterUsers = 30

// TestClusterMultiProcess runs 8 processes of 32 goroutines against the
// cluster for each policy of clusterPolicies, on Redis's clocks: exactly the
// limits must be admitted, and each user's window must hold exactly its
// admissions (every rollback removed its entry).
func TestClusterMultiProcess(t *testing.T) {
	c := sharedCluster(t)
	for _, name := range []string{"per-user", "global-per-user"} {
		t.Run(name, func(t *testing.T) {
			p := clusterPolicies[name]
			prefix := newPrefix()
			perUser := runClusterChildren(t, c, prefix, name)
			total := 0
			for u, n := range perUser {
				total += n
				if lim := p.Rules[len(p.Rules)-1].Limit; int64(n) > lim {
					t.Errorf("user %s: %d admitted, limit %d", u, n, lim)
				}
			}
			want := clusterUsers * 5
			if name == "global-per-user" {
				want = 100
			}
			if total != want {
				t.Errorf("admitted %d, want exactly %d", total, want)
			}
			// What the cluster holds.
			s := openCluster(t, redisstore.Config{Prefix: prefix})
			rc := clusterClient(t, c)
			stored := 0
			for i := range clusterUsers {
				u := fmt.Sprintf("u%d", i)
				ks := s.Keys(request(t, p, map[string]string{"user": u}, 1))
				n := units(entries(t, rc, ks[len(ks)-1]))
				if n != perUser[u] {
					t.Errorf("user %s: window holds %d entries, %d admitted", u, n, perUser[u])
				}
				stored += n
				if len(ks) == 2 && i == 0 {
					if g := units(entries(t, rc, ks[0])); g != 100 {
						t.Errorf("global window holds %d entries, want 100", g)
					}
				}
			}
			checkClusterKeys(t, c, prefix)
			t.Logf("cluster, %s: %d processes x %d goroutines admitted %d (want %d) over %d users; windows hold %d",
				name, helperProcs, helperGoroutines, total, want, len(perUser), stored)
		})
	}
}

// checkClusterKeys fails t if a key under prefix has no TTL.
func checkClusterKeys(t *testing.T, c *redistest.Cluster, prefix string) {
	t.Helper()
	m, err := clusterTTLs(c, prefix)
	if err != nil {
		t.Fatal(err)
	}
	for k, ttl := range m {
		if ttl < 0 {
			t.Errorf("key %s has no TTL", k)
		}
	}
}

// clusterClient returns a rueidis cluster client for inspection.
func clusterClient(t testing.TB, c *redistest.Cluster) rueidis.Client {
	t.Helper()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	return rc
}

// runClusterChildren runs the child processes for policy and returns the
// admissions per user.
func runClusterChildren(t *testing.T, c *redistest.Cluster, prefix, policy string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	perUser := map[string]int{}
	runChildren(t, ctx, helperProcs, "TestClusterHelperProcess",
		[]string{helperEnv + "=" + strings.Join(c.Addrs(), ","), helperPrefixEnv + "=" + prefix, clusterPolicyEnv + "=" + policy},
		func(_ int, line string) {
			if u, ok := strings.CutPrefix(line, "admit "); ok {
				perUser[u]++
			}
		})
	return perUser
}

// TestClusterHelperProcess is a child of TestClusterMultiProcess; run
// directly, it does nothing.
func TestClusterHelperProcess(t *testing.T) {
	addrs := os.Getenv(helperEnv)
	p := clusterPolicies[os.Getenv(clusterPolicyEnv)]
	if addrs == "" || p == nil {
		return
	}
	s, err := redisstore.New(redisstore.Config{Mode: redisstore.Cluster, Addrs: strings.Split(addrs, ","),
		Prefix: os.Getenv(helperPrefixEnv)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lim := sluice.NewLimiter(s, sluice.Config{Timeout: 5 * time.Second})
	ctx := context.Background()
	childMain(t, func() (string, bool, error) {
		u := fmt.Sprintf("u%d", rand.IntN(clusterUsers))
		d, err := lim.Allow(ctx, p, map[string]string{"user": u})
		if err != nil || !d.Allowed {
			return "", false, err
		}
		return "admit " + u, false, nil
	})
}

// TestClusterBatchesBySlot checks that decisions bound for one hash slot of
// a Cluster share script calls: 64 goroutines deciding on one key make far
// fewer script calls than decisions, and every decision is counted once.
func TestClusterBatchesBySlot(t *testing.T) {
	c := sharedCluster(t)
	s := openCluster(t, redisstore.Config{Prefix: newPrefix()})
	p := &sluice.Policy{Name: "hot", Rules: []sluice.Rule{{Name: "global", Limit: 1 << 40, Window: time.Minute}}}
	key := keysOf(t, s, p, nil)[0]
	master, _, err := c.MasterOf(key)
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, each = 64, 40
	before := scriptCalls(t, master)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				if _, err := direct(s).Decide(context.Background(), request(t, p, nil, 1)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	calls := scriptCalls(t, master) - before
	if decisions := goroutines * each; calls <= 0 || calls > decisions/2 {
		t.Errorf("%d decisions on one slot took %d script calls, want at most %d: batched", decisions, calls, decisions/2)
	}
	// A peek counts the request it would admit.
	d := peek(t, s, p, nil, 1)
	if want := int64(goroutines*each) + 1; d.Limits()[0].Used != want {
		t.Errorf("the key counts %d, want %d", d.Limits()[0].Used, want)
	}
	t.Logf("%d decisions, %d script calls", goroutines*each, calls)
}

// TestClusterSpreadsHotKey checks that a spread rule keeps one tenant's
// window as sub-windows evenly over the masters, and that together they
// admit the whole limit and no more.
func TestClusterSpreadsHotKey(t *testing.T) {
	c := sharedCluster(t)
	prefix := newPrefix()
	s := openCluster(t, redisstore.Config{Prefix: prefix})
	lim := sluice.NewLimiter(s, sluice.Config{Timeout: -1})
	p := &sluice.Policy{Name: "hot", Rules: []sluice.Rule{
		{Name: "tenant", By: []string{"tenant"}, Limit: 60, Window: time.Minute, Spread: 6},
	}}
	admitted := 0
	for range 80 {
		d, err := lim.Allow(context.Background(), p, map[string]string{"tenant": "acme"})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted != 60 {
		t.Errorf("admitted %d of 80, want the limit, 60", admitted)
	}
	ttls, err := clusterTTLs(c, prefix)
	if err != nil {
		t.Fatal(err)
	}
	masters := map[string]int{}
	for k := range ttls {
		m, _, err := c.MasterOf(k)
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Addr()]++
	}
	if len(ttls) != 6 || len(masters) != 3 {
		t.Errorf("the tenant's window is %d keys on %d masters (%v), want 6 keys on all 3", len(ttls), len(masters), masters)
	}
	for m, n := range masters {
		if n != 2 {
			t.Errorf("master %s holds %d sub-windows, want 2: the store places them in equal ranges of slots", m, n)
		}
	}
	t.Logf("6 sub-windows over the masters: %v", masters)
}

// TestClusterSlot checks the slots the store places spread sub-windows by
// against the Cluster's own CLUSTER KEYSLOT.
func TestClusterSlot(t *testing.T) {
	c := sharedCluster(t)
	m := c.Masters()[0]
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		b := make([]byte, 1+r.IntN(40))
		for j := range b {
			b[j] = byte(' ' + r.IntN(95))
		}
		tag := strings.NewReplacer("{", "(", "}", ")").Replace(string(b))
		got, err := m.Do("CLUSTER", "KEYSLOT", "{"+tag+"}x")
		if err != nil {
			t.Fatal(err)
		}
		if want := strconv.Itoa(int(redisstore.ClusterSlot(tag))); strings.TrimSpace(got) != want {
			t.Errorf("tag %d %q: CLUSTER KEYSLOT %s, the store's %s", i, tag, got, want)
		}
	}
}

// TestClusterBatchesByMaster decides users spread over every slot from 64
// goroutines: batches form per master, across slots, and every user's
// window counts exactly its admissions.
func TestClusterBatchesByMaster(t *testing.T) {
	c := sharedCluster(t)
	s := openCluster(t, redisstore.Config{Prefix: newPrefix()})
	p := &sluice.Policy{Name: "spread", Rules: []sluice.Rule{{Name: "user", Limit: 1 << 30, Window: time.Minute, By: []string{"user"}}}}
	const goroutines, each, users = 64, 40, 512
	before := scriptCalls(t, c.Masters()...)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				u := fmt.Sprintf("u%d", (g*each+i)%users)
				if _, err := direct(s).Decide(context.Background(), request(t, p, map[string]string{"user": u}, 1)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	n := scriptCalls(t, c.Masters()...) - before
	if decisions := goroutines * each; n <= 0 || n > decisions/2 {
		t.Errorf("%d decisions over %d users took %d script calls, want at most %d: batched across slots", decisions, users, n, decisions/2)
	}
	for u := range users {
		attrs := map[string]string{"user": fmt.Sprintf("u%d", u)}
		if d := peek(t, s, p, attrs, 1); d.Limits()[0].Used != int64(goroutines*each/users)+1 {
			t.Fatalf("user u%d counts %d, want %d", u, d.Limits()[0].Used-1, goroutines*each/users)
		}
	}
	t.Logf("%d decisions over %d users, %d script calls", goroutines*each, users, n)
}

// TestClusterBatchOnWrongMaster sends one batch of users of every master
// to the master of the first: those the node does not serve fail there
// before writing, and are sent again to their own masters; each counts
// once.
func TestClusterBatchOnWrongMaster(t *testing.T) {
	c := sharedCluster(t)
	s := openCluster(t, redisstore.Config{Prefix: newPrefix(), Clock: storetest.NewClock(storetest.T0).Now})
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	p := &sluice.Policy{Name: "wrong", Rules: []sluice.Rule{{Name: "user", Limit: 5, Window: time.Minute, By: []string{"user"}}}}
	var keys [][]string
	var reqs []*store.Request
	masters := map[string]bool{}
	for u := 0; len(reqs) < 12; u++ {
		req := request(t, p, map[string]string{"user": fmt.Sprintf("u%d", u)}, 1)
		k := s.Keys(req)
		m, _, err := c.MasterOf(k[0])
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Addr()] = true
		keys, reqs = append(keys, k), append(reqs, req)
	}
	if len(masters) < 2 {
		t.Fatalf("12 users on %d master(s); want several", len(masters))
	}
	for round := range 2 {
		for i, err := range redisstore.DecideAcrossSlots(client, keys, reqs, storetest.T0.UnixMicro()) {
			if err != nil {
				t.Fatalf("round %d, user %d: %v", round+1, i, err)
			}
			if r := reqs[i].Results[0]; !r.Fits || r.Used != int64(round+1) {
				t.Errorf("round %d, user %d: %+v, want fits with used %d", round+1, i, r, round+1)
			}
		}
	}
}
