package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/redisstore/goredis"
)

// TestEvalerReplies runs small scripts through each client's Evaler: integer
// arrays come back as they are; anything else is an error, never a panic.
func TestEvalerReplies(t *testing.T) {
	server.Require(t)
	gc := redis.NewClient(&redis.Options{Addr: server.Addr(), MaxRetries: -1})
	defer gc.Close()
	evalers := map[string]redisstore.Evaler{
		"rueidis": redisstore.NewRueidisEvaler(admin(t)),
		"goredis": goredis.NewEvaler(gc),
	}
	ctx := context.Background()
	for name, ev := range evalers {
		t.Run(name, func(t *testing.T) {
			got, err := ev.Eval(ctx, "return {1, -2, tonumber(ARGV[1])}", []string{"k"}, []string{"1767225600000000"})
			if err != nil || len(got) != 3 || got[0] != 1 || got[1] != -2 || got[2] != 1767225600000000 {
				t.Errorf("integers: %v, %v", got, err)
			}
			for _, bad := range []string{"return 'a'", "return {1, 'a'}", "return {1, {2}}", "return 7", "return {1, false}", "return redis.error_reply('ERR boom')"} {
				if got, err := ev.Eval(ctx, bad, nil, nil); err == nil {
					t.Errorf("%s: %v, want an error", bad, got)
				}
			}
			_, err = ev.EvalSHA(ctx, strings.Repeat("0", 40), nil, nil)
			if !errors.Is(err, redisstore.ErrNoScript) {
				t.Errorf("EVALSHA of an unknown script: %v, want ErrNoScript", err)
			}
		})
	}
}
