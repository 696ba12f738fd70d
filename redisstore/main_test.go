package redisstore_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/redisstore/goredis"
)

// Environment of a TestHelperProcess child: the server's address and the
// key prefix to use.
const (
	helperEnv       = "SLUICE_REDISSTORE_HELPER_ADDR"
	helperPrefixEnv = "SLUICE_REDISSTORE_HELPER_PREFIX"
)

// server is the package's redis-server, shared by every test.
var server *redistest.Server

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		// A child of TestMultiProcess: it uses its parent's server.
		os.Exit(m.Run())
	}
	s, err := redistest.StartMain(redistest.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	server = s
	code := m.Run()
	stopTopologies()
	if err := s.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

var prefixes atomic.Int64

// newPrefix returns a key prefix no other test uses.
func newPrefix() string { return fmt.Sprintf("t%d", prefixes.Add(1)) }

// backend opens a store over one of the supported clients.
type backend struct {
	name string
	open func(tb testing.TB, cfg redisstore.Config) *redisstore.Store
}

var backends = []backend{
	{"rueidis", openRueidis},
	{"rueidis-scripts", openRueidisScripts},
	{"goredis", openGoRedis},
}

// openRueidisScripts opens a store with New on the package's server that
// runs decide.lua as a script (EVALSHA), as it does on a server without
// functions.
func openRueidisScripts(tb testing.TB, cfg redisstore.Config) *redisstore.Store {
	tb.Helper()
	s := openRueidis(tb, cfg)
	redisstore.UseScripts(s)
	return s
}

// openRueidis opens a store with New on the package's server.
func openRueidis(tb testing.TB, cfg redisstore.Config) *redisstore.Store {
	tb.Helper()
	server.Require(tb)
	cfg.Addrs = []string{server.Addr()}
	s, err := redisstore.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// openGoRedis opens a store over a go-redis client on the package's server.
func openGoRedis(tb testing.TB, cfg redisstore.Config) *redisstore.Store {
	tb.Helper()
	server.Require(tb)
	c := redis.NewClient(&redis.Options{Addr: server.Addr(), MaxRetries: -1})
	tb.Cleanup(func() { c.Close() })
	s, err := goredis.New(c, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// admin returns a client for inspecting the package's server.
func admin(tb testing.TB) rueidis.Client {
	tb.Helper()
	server.Require(tb)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{server.Addr()}, DisableCache: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return c
}

// ttls returns every key under prefix with its remaining time to live.
func ttls(ctx context.Context, c rueidis.Client, prefix string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	var cursor uint64
	for {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match(prefix+":*").Count(1000).Build()).AsScanEntry()
		if err != nil {
			return nil, err
		}
		for _, k := range e.Elements {
			ms, err := c.Do(ctx, c.B().Pttl().Key(k).Build()).AsInt64()
			if err != nil {
				return nil, err
			}
			if ms == -2 { // expired since the scan
				continue
			}
			out[k] = time.Duration(ms) * time.Millisecond
		}
		if cursor = e.Cursor; cursor == 0 {
			return out, nil
		}
	}
}

// entry is one entry of a window's sorted set, as window.lua lays it out.
type entry struct {
	Member string // as stored: "<end>" or "<end>:<cost>"
	Score  int64  // the entry's time in µs: the key's epoch plus its score
	End    int64
	Cost   int64
}

// members returns the members of the sorted set key with their scores,
// which must be whole numbers, as stored.
func members(tb testing.TB, c rueidis.Client, key string) []entry {
	tb.Helper()
	zs, err := c.Do(context.Background(), c.B().Zrange().Key(key).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil {
		tb.Fatalf("ZRANGE %s: %v", key, err)
	}
	out := make([]entry, len(zs))
	for i, z := range zs {
		out[i] = entry{Member: z.Member, Score: int64(z.Score)}
		if float64(out[i].Score) != z.Score {
			tb.Fatalf("ZRANGE %s: score %v of %q is not a whole number", key, z.Score, z.Member)
		}
	}
	return out
}

// entries returns the entries of the window key, oldest first, with their
// times made absolute; none for a missing key. It fails the test on
// anything window.lua would not write.
func entries(tb testing.TB, c rueidis.Client, key string) []entry {
	tb.Helper()
	zs, err := c.Do(context.Background(), c.B().Zrange().Key(key).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil {
		tb.Fatalf("ZRANGE %s: %v", key, err)
	}
	if len(zs) == 0 {
		return nil
	}
	last := zs[len(zs)-1]
	epoch, err := strconv.ParseInt(strings.TrimPrefix(last.Member, "@"), 10, 64)
	if !strings.HasPrefix(last.Member, "@") || err != nil || !math.IsInf(last.Score, 1) {
		tb.Fatalf("ZRANGE %s: last entry %q with score %v, want the epoch entry", key, last.Member, last.Score)
	}
	if len(zs) == 1 {
		tb.Fatalf("ZRANGE %s: the epoch entry alone", key)
	}
	out := make([]entry, len(zs)-1)
	for i, z := range zs[:len(zs)-1] {
		e := entry{Member: z.Member, Score: epoch + int64(z.Score), Cost: 1}
		end, cost, hasCost := strings.Cut(z.Member, ":")
		e.End, err = strconv.ParseInt(end, 10, 64)
		if err == nil && hasCost {
			e.Cost, err = strconv.ParseInt(cost, 10, 64)
		}
		if err != nil || float64(int64(z.Score)) != z.Score || e.Cost < 1 || i > 0 && (e.End <= out[i-1].End || e.Score <= out[i-1].Score) {
			tb.Fatalf("ZRANGE %s: entry %q with score %v after %+v: not a window entry", key, z.Member, z.Score, out[max(0, i-1)])
		}
		out[i] = e
	}
	return out
}

// units returns the total cost of es.
func units(es []entry) int {
	n := 0
	for _, e := range es {
		n += int(e.Cost)
	}
	return n
}

// keyNames returns the keys under prefix, for messages.
func keyNames(m map[string]time.Duration) string {
	var names []string
	for k := range m {
		names = append(names, k)
	}
	return strings.Join(names, " ")
}

// openOwn starts a server of the test's own, one a fault may stop or
// restart, and opens a store with cfg on it.
func openOwn(tb testing.TB, cfg redisstore.Config) (*redistest.Server, *redisstore.Store) {
	tb.Helper()
	srv := redistest.Start(tb)
	cfg.Addrs = []string{srv.Addr()}
	s, err := redisstore.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return srv, s
}

// freeze stops srv (SIGSTOP) and returns what resumes it; a test that
// ends with srv still stopped resumes it then.
func freeze(tb testing.TB, srv *redistest.Server) (thaw func()) {
	tb.Helper()
	if err := srv.Pause(); err != nil {
		tb.Fatal(err)
	}
	var once sync.Once
	tb.Cleanup(func() { once.Do(func() { srv.Resume() }) })
	return func() {
		tb.Helper()
		var err error
		once.Do(func() { err = srv.Resume() })
		if err != nil {
			tb.Fatal(err)
		}
	}
}
