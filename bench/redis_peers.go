package main

import (
	"context"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/throttled/throttled/v2"
	goredisstore "github.com/throttled/throttled/v2/store/goredisstore.v9"
	"github.com/ulule/limiter/v3"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/resolve"
	"github.com/sluicerate/sluice/redisstore"
)

// limits is the workload's limit: 100 per minute per key.
const (
	perKeyLimit = 100
	window      = time.Minute
)

// instance is one contender opened on the shared Redis.
type instance struct {
	// worker returns the decider of one goroutine.
	worker func() decideFunc
	// run, when set, runs the workload itself instead of worker: a
	// contender in another process (rolling-rate-limiter on Node.js).
	run func(w workload) (outcome, error)
	// redisKey names the Redis key that holds key i's state, for MEMORY
	// USAGE; nil when the contender keeps nothing in Redis.
	redisKey func(i int) string
	// zset reports that the keys are sorted sets (a log of events).
	zset  bool
	close func()
}

// contender is one implementation in the comparison.
type contender struct {
	name string
	note string
	open func(addr string, names []string) (*instance, error)
}

func keyNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = "k" + strconv.Itoa(i)
	}
	return names
}

// onePolicy is the one-rule policy: 100 per minute per key.
func onePolicy() *sluice.Policy {
	return &sluice.Policy{Name: "bench", Rules: []sluice.Rule{
		{Name: "per-key", Limit: perKeyLimit, Window: window, By: []string{"key"}},
	}}
}

// agedPolicy is onePolicy over a window of one second: at this workload's
// rate each key sees about ten decisions a second, far below its limit,
// and its entries leave the window all the time. The keys of a run of a
// few seconds are then older than their window, which the keys of
// onePolicy never are (a key whose epoch is still in its window needs one
// read less per decision: nothing has left the window).
func agedPolicy() *sluice.Policy {
	return &sluice.Policy{Name: "aged", Rules: []sluice.Rule{
		{Name: "per-key", Limit: perKeyLimit, Window: time.Second, By: []string{"key"}},
	}}
}

// notifierPolicy is the notifier's hierarchy: a global cap over a per-category
// cap, here with a global cap the run never reaches, so that it costs what
// a second rule costs without changing the workload's answers.
func notifierPolicy() *sluice.Policy {
	return &sluice.Policy{Name: "notify", Rules: []sluice.Rule{
		{Name: "global", Limit: 1 << 40, Window: window},
		{Name: "category", Limit: perKeyLimit, Window: window, By: []string{"key"}},
	}}
}

// algorithmPolicy is onePolicy with algorithm a.
func algorithmPolicy(a sluice.Algorithm) *sluice.Policy {
	p := onePolicy()
	p.Name += "-" + a.String()
	p.Rules[0].Algorithm = a
	return p
}

// rulesPolicy is a policy of n rules, all by key, 100 per minute each.
func rulesPolicy(n int) *sluice.Policy {
	p := &sluice.Policy{Name: "rules" + strconv.Itoa(n)}
	for i := range n {
		p.Rules = append(p.Rules, sluice.Rule{Name: "r" + strconv.Itoa(i), Limit: perKeyLimit, Window: window, By: []string{"key"}})
	}
	return p
}

// openSluice opens sluice's Redis store and decides p through a Limiter, as
// an application calls it.
func openSluice(p *sluice.Policy, limiterCfg sluice.Config) func(addr string, names []string) (*instance, error) {
	return openSluiceOp(p, limiterCfg, func(ctx context.Context, lim *sluice.Limiter, attrs map[string]string) (bool, error) {
		d, err := lim.Allow(ctx, p, attrs)
		return d.Allowed, err
	})
}

// openSluiceOp is openSluice with op in place of Allow: what one
// operation on a key does.
func openSluiceOp(p *sluice.Policy, limiterCfg sluice.Config, op func(ctx context.Context, lim *sluice.Limiter, attrs map[string]string) (bool, error)) func(addr string, names []string) (*instance, error) {
	return func(addr string, names []string) (*instance, error) {
		s, err := redisstore.New(redisstore.Config{Addrs: []string{addr}, Prefix: "sluice"})
		if err != nil {
			return nil, err
		}
		lim := sluice.NewLimiter(s, limiterCfg)
		last := len(p.Rules) - 1
		return &instance{
			worker: func() decideFunc {
				attrs := map[string]string{"key": ""}
				return func(ctx context.Context, i int) (bool, error) {
					attrs["key"] = names[i]
					return op(ctx, lim, attrs)
				}
			},
			redisKey: func(i int) string {
				req, err := resolve.Request(p, map[string]string{"key": names[i]}, 1)
				if err != nil {
					return ""
				}
				return s.Keys(req)[last]
			},
			zset:  p.Rules[last].Algorithm == sluice.Log,
			close: func() { s.Close() },
		}, nil
	}
}

func newGoRedis(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr})
}

func openRedisRate(addr string, names []string) (*instance, error) {
	c := newGoRedis(addr)
	lim := redis_rate.NewLimiter(c)
	limit := redis_rate.PerMinute(perKeyLimit)
	return &instance{
		worker: func() decideFunc {
			return func(ctx context.Context, i int) (bool, error) {
				res, err := lim.Allow(ctx, names[i], limit)
				if err != nil {
					return false, err
				}
				return res.Allowed > 0, nil
			}
		},
		redisKey: func(i int) string { return "rate:" + names[i] },
		close:    func() { c.Close() },
	}, nil
}

func openUlule(addr string, names []string) (*instance, error) {
	c := newGoRedis(addr)
	store, err := ulredis.NewStoreWithOptions(c, limiter.StoreOptions{Prefix: "ulule"})
	if err != nil {
		c.Close()
		return nil, err
	}
	lim := limiter.New(store, limiter.Rate{Period: window, Limit: perKeyLimit})
	return &instance{
		worker: func() decideFunc {
			return func(ctx context.Context, i int) (bool, error) {
				res, err := lim.Get(ctx, names[i])
				return err == nil && !res.Reached, err
			}
		},
		redisKey: func(i int) string { return "ulule:" + names[i] },
		close:    func() { c.Close() },
	}, nil
}

func openThrottled(addr string, names []string) (*instance, error) {
	c := newGoRedis(addr)
	store, err := goredisstore.NewCtx(c, "throttled:")
	if err != nil {
		c.Close()
		return nil, err
	}
	lim, err := throttled.NewGCRARateLimiterCtx(store, throttled.RateQuota{MaxRate: throttled.PerMin(perKeyLimit), MaxBurst: perKeyLimit - 1})
	if err != nil {
		c.Close()
		return nil, err
	}
	return &instance{
		worker: func() decideFunc {
			return func(ctx context.Context, i int) (bool, error) {
				limited, _, err := lim.RateLimitCtx(ctx, names[i], 1)
				return err == nil && !limited, err
			}
		},
		redisKey: func(i int) string { return "throttled:" + names[i] },
		close:    func() { c.Close() },
	}, nil
}

// naiveScript is the textbook sliding log: trim, count, add a
// "µs-timestamp-random" member, expire.
const naiveScript = `
local key, now, window, limit = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, 0, now - window)
if redis.call('ZCARD', key) < limit then
  redis.call('ZADD', key, now, ARGV[4])
  redis.call('EXPIRE', key, math.ceil(window / 1000000))
  return 1
end
return 0
`

// naiveArgs returns the script's arguments at the current time.
func naiveArgs(r *rand.Rand) []string {
	now := time.Now().UnixMicro()
	return []string{strconv.FormatInt(now, 10), strconv.FormatInt(window.Microseconds(), 10), strconv.Itoa(perKeyLimit),
		strconv.FormatInt(now, 10) + "-" + strconv.FormatUint(r.Uint64()%1_000_000_000, 10)}
}

func openNaiveRueidis(addr string, names []string) (*instance, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return nil, err
	}
	script := rueidis.NewLuaScript(naiveScript)
	return &instance{
		worker: func() decideFunc {
			r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
			return func(ctx context.Context, i int) (bool, error) {
				n, err := script.Exec(ctx, c, []string{"naive:" + names[i]}, naiveArgs(r)).AsInt64()
				return n == 1, err
			}
		},
		redisKey: func(i int) string { return "naive:" + names[i] },
		zset:     true,
		close:    c.Close,
	}, nil
}

func openNaiveGoRedis(addr string, names []string) (*instance, error) {
	c := newGoRedis(addr)
	script := redis.NewScript(naiveScript)
	return &instance{
		worker: func() decideFunc {
			r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
			return func(ctx context.Context, i int) (bool, error) {
				n, err := script.Run(ctx, c, []string{"naivegr:" + names[i]}, naiveArgs(r)).Int64()
				return n == 1, err
			}
		},
		redisKey: func(i int) string { return "naivegr:" + names[i] },
		zset:     true,
		close:    func() { c.Close() },
	}, nil
}

// redisContenders are compared on one Redis with the same workload.
func redisContenders() []contender {
	return []contender{
		{name: "sluice", note: "redisstore over rueidis, one rule, through Limiter.Allow", open: openSluice(onePolicy(), benchLimiterConfig)},
		{name: "sluice notifier (2 rules)", note: "global + per-key, one script call per decision", open: openSluice(notifierPolicy(), benchLimiterConfig)},
		{name: "sluice gcra", note: "one rule, GCRA: one small key", open: openSluice(algorithmPolicy(sluice.GCRA), benchLimiterConfig)},
		{name: slidingCounterRow, note: "one rule, two fixed-window counters in one small key", open: openSluice(algorithmPolicy(sluice.SlidingCounter), benchLimiterConfig)},
		{name: calendarRow, note: "one rule: a count per calendar month in Europe/Berlin, 12 months kept", open: openSluice(calendarPolicy(), benchLimiterConfig)},
		{name: creditsRow, note: "one rule: a balance drawn by each decision, refilled monthly", open: openSluice(creditsPolicy(), benchLimiterConfig)},
		{name: "sluice, 1 s window (keys older than it)", note: "one rule of 100 per second: entries keep leaving the window", open: openSluice(agedPolicy(), benchLimiterConfig)},
		{name: "go-redis/redis_rate v10", note: "GCRA, go-redis v9", open: openRedisRate},
		{name: "ulule/limiter v3", note: "fixed window, redis store, go-redis v9", open: openUlule},
		{name: "throttled/throttled v2", note: "GCRA, goredisstore.v9", open: openThrottled},
		{name: "naive Lua log (rueidis)", note: "textbook ZREMRANGEBYSCORE/ZCARD/ZADD/EXPIRE, auto-pipelined", open: openNaiveRueidis},
		{name: "naive Lua log (go-redis)", note: "the same script through go-redis", open: openNaiveGoRedis},
		{name: "rolling-rate-limiter 0.4.2 (Node.js)", note: "sliding log: MULTI of ZREMRANGEBYSCORE/ZADD/ZRANGE/EXPIRE over ioredis, a uuid per attempt", open: openRolling},
	}
}

// benchLimiterConfig turns off the Limiter's per-call deadline and circuit
// breaker, which no peer has, so that every contender waits for Redis alike.
var benchLimiterConfig = sluice.Config{Timeout: -1, Breaker: sluice.Breaker{Failures: -1}}
