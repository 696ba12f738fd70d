package quota

import (
	"context"
	"errors"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/store"
)

// Where is where sluice credits and sluice usage run: through a server
// (Client.Server set), or on the store of a configuration file directly.
type Where struct {
	Client Client

	// File is the configuration file that defines the policies, and
	// Redis, when set, the URL of the Redis to use instead of the file's
	// store; Open opens that store (launch.Open), and close closes it.
	File, Redis string
	Open        func(cfg *config.Config, redisURL string) (st store.Store, close func(), err error)
}

// Credit applies req (see Source.Credit).
func (w *Where) Credit(ctx context.Context, req *CreditRequest) (Balance, error) {
	if err := req.Check(); err != nil {
		return Balance{}, err
	}
	if w.Client.Server != "" {
		return w.Client.Credit(ctx, req)
	}
	var b Balance
	err := w.onStore(req.Policy, func(s Source, p *sluice.Policy) (err error) {
		b, err = s.Credit(ctx, p, req)
		return err
	})
	return b, err
}

// Usage returns t's usage (see Source.Usage).
func (w *Where) Usage(ctx context.Context, t UsageTarget) (Usage, error) {
	if t.Policy == "" {
		return Usage{}, invalid("the policy is missing; name it with --policy")
	}
	if w.Client.Server != "" {
		return w.Client.Usage(ctx, t.Policy, t.Rule, t.Attributes, t.At)
	}
	var u Usage
	err := w.onStore(t.Policy, func(s Source, p *sluice.Policy) (err error) {
		u, err = s.Usage(ctx, p, t.Rule, t.Attributes, t.At)
		return err
	})
	return u, err
}

// onStore runs call on the policy of the file named policy, on its store
// (or Redis).
func (w *Where) onStore(policy string, call func(Source, *sluice.Policy) error) error {
	if w.File == "" {
		return errors.New("--server URL or --config FILE is required")
	}
	cfg, err := config.Load(w.File)
	if err != nil {
		return err
	}
	p, err := cfg.FindPolicy(policy)
	if err != nil {
		return err
	}
	st, closeStore, err := w.Open(cfg, w.Redis)
	if err != nil {
		return err
	}
	defer closeStore()
	if _, local := st.(store.Local); local {
		return errors.New("the store is in this process's memory, which holds no balance or usage of another: " +
			"give --redis URL (or a file with a Redis store), or --server URL of the sluice serve that keeps them")
	}
	lim := sluice.NewLimiter(st, sluice.Config{Timeout: 5 * time.Second})
	defer lim.Close()
	return call(Source{Limiter: lim, Store: st}, p)
}
