package main

import (
	"context"
	"fmt"
	"io"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/deploy"
	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/internal/envoy/decide"
	"github.com/sluicerate/sluice/internal/envoy/rls"
	"github.com/sluicerate/sluice/internal/launch"
)

// checkEnvoy is sluice check --envoy-config: the statuses of one request,
// decided without recording.
func checkEnvoy(ctx context.Context, ef *deploy.Flags, domain string, descs rls.Descriptors, hits uint32, redisURL string, asJSON bool, stdout, stderr io.Writer) int {
	fail := func(format string, a ...any) int { return usageError(stderr, "check", format, a...) }
	switch {
	case domain == "":
		return fail("--domain D is required with --envoy-config")
	case len(descs) == 0:
		return fail("--descriptor k=v[,k2=v2] is required with --envoy-config; repeat it for several descriptors")
	}
	opts, err := ef.EnvoyOptions()
	if err != nil {
		return fail("%v", err)
	}
	cfg, err := envoy.Load(ef.EnvoyDir(), opts.Load)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	for _, n := range cfg.Notes {
		fmt.Fprintln(stderr, "note:", n)
	}
	st, err := launch.Open(nil, redisURL)
	if err != nil {
		return fail("%v", err)
	}
	defer st.Close()
	opts.Decide.DryRun = true
	res, err := decide.Decide(ctx, cfg, sluice.NewLimiter(st.Store, sluice.Config{}), descs.Request(domain, hits), opts.Decide)
	if err != nil {
		return fail("%v", err)
	}
	out := res.Response
	if asJSON {
		b, err := protojson.Marshal(out)
		if err != nil {
			return fail("%v", err)
		}
		fmt.Fprintln(stdout, string(b))
	} else {
		descs.WriteResponse(stdout, domain, st.Where, out)
	}
	if out.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
		return exitDenied
	}
	return exitOK
}
