package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The service section's key mix: key index i (0 ≤ i < w.keys, walked by
// each client from its own offset) is user "u<i>", except every tenth
// index, which goes to one of serviceHeavyUsers heavy users "h<k>"
// (k = i/10 mod serviceHeavyUsers) on route r0. So 10% of the requests
// come from 10 users, who pass their limits within the first second, and
// the others from 9,000 users who stay under them. Route of index i:
// "r<i mod 10>".
const serviceHeavyUsers = 10

func serviceUser(i int) string {
	if i%10 == 0 {
		return "h" + strconv.Itoa(i/10%serviceHeavyUsers)
	}
	return "u" + strconv.Itoa(i)
}

func serviceRoute(i int) string { return "r" + strconv.Itoa(i%10) }

// serviceDomain is one envoyproxy/ratelimit domain of the section: its
// configuration file and the request of key index i.
type serviceDomain struct {
	name  string
	title string
	yaml  string
	// twoDescriptors: requests carry (user) and (route, user); else (user).
	twoDescriptors bool
}

func serviceDomains() []serviceDomain {
	return []serviceDomain{
		{name: "one", title: "one rule: 100 per minute per user", yaml: `domain: one
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 100}
`},
		{name: "two", title: "two descriptors: (user) 100 per minute, (route, user) 50 per minute", twoDescriptors: true, yaml: `domain: two
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: route
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 50}
`},
	}
}

// withKey returns d's configuration file with key, one of sluice's own
// keys of a rate_limit ("algorithm: gcra"), added to every limit; "" for
// the file as it is.
func (d serviceDomain) withKey(key string) string {
	if key == "" {
		return d.yaml
	}
	return strings.ReplaceAll(d.yaml, "}\n", ", "+key+"}\n")
}

// request returns the RateLimitRequest of key index i.
func (d serviceDomain) request(i int) *rlsv3.RateLimitRequest {
	user := &rlv3.RateLimitDescriptor_Entry{Key: "user", Value: serviceUser(i)}
	req := &rlsv3.RateLimitRequest{Domain: d.name, HitsAddend: 1,
		Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{user}}}}
	if d.twoDescriptors {
		req.Descriptors = append(req.Descriptors, &rlv3.RateLimitDescriptor{Entries: []*rlv3.RateLimitDescriptor_Entry{
			{Key: "route", Value: serviceRoute(i)}, user}})
	}
	return req
}

// serviceLoad is what one load run of a protocol measured.
type serviceLoad struct {
	requests, allowed, denied, failed int64
	elapsed                           time.Duration
	p50, p99                          time.Duration
	clientCPU                         time.Duration // the load generator's CPU time over the run
	firstErr                          string
}

// perSecond returns the decisions (OK or OVER_LIMIT answers) per second;
// failed calls are not decisions.
func (l serviceLoad) perSecond() float64 { return float64(l.allowed+l.denied) / l.elapsed.Seconds() }

// grpcClient drives Envoy's rate-limit service over gRPC: w.goroutines
// concurrent calls (streams) spread over conns HTTP/2 connections, as
// Envoy's workers hold one connection each to the service.
type grpcClient struct {
	conns []*grpc.ClientConn
}

func dialGRPC(addr string, n int) (*grpcClient, error) {
	c := &grpcClient{}
	for range n {
		conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			c.close()
			return nil, fmt.Errorf("gRPC client for %s: %w", addr, err)
		}
		conn.Connect()
		c.conns = append(c.conns, conn)
	}
	return c, nil
}

func (c *grpcClient) close() {
	for _, conn := range c.conns {
		conn.Close()
	}
}

// run sends d's requests for w.duration and measures them with the
// library sections' loop (run in workload.go).
func (c *grpcClient) run(w workload, reqs []*rlsv3.RateLimitRequest, progress func(float64)) serviceLoad {
	clients := make([]rlsv3.RateLimitServiceClient, len(c.conns))
	for i, conn := range c.conns {
		clients[i] = rlsv3.NewRateLimitServiceClient(conn)
	}
	var denied, next int64
	deniedBy := make([]int64, w.goroutines)
	o := run(w, func() decideFunc {
		g := next
		next++
		client := clients[int(g)%len(clients)]
		return func(ctx context.Context, i int) (bool, error) {
			resp, err := client.ShouldRateLimit(ctx, reqs[i])
			if err != nil {
				return false, err
			}
			switch resp.GetOverallCode() {
			case rlsv3.RateLimitResponse_OK:
				return true, nil
			case rlsv3.RateLimitResponse_OVER_LIMIT:
				deniedBy[g]++
				return false, nil
			}
			return false, fmt.Errorf("overall_code %v", resp.GetOverallCode())
		}
	}, progress)
	for _, n := range deniedBy {
		denied += n
	}
	l := serviceLoad{requests: o.ops + o.errors, allowed: o.allowed, denied: denied, failed: o.errors,
		elapsed: o.elapsed, p50: o.p50, p99: o.p99,
		clientCPU: time.Duration(o.clientCPU * float64(o.ops) * float64(time.Microsecond))}
	if o.firstErr != nil {
		l.firstErr = o.firstErr.Error()
	}
	return l
}

// wrkRequests is the wrk script (runWrkScript appends its report) that
// POSTs the key mix's requests to /json, the same bodies as the gRPC
// client's requests in protobuf's JSON mapping: each thread walks the key
// indexes from its own offset.
const wrkRequests = `-- the service section's key mix (bench/service_load.go)
local domain, keys, heavy, two = "%s", %d, %d, %t
local nextid = 0
function setup(thread)
  thread:set("id", nextid)
  nextid = nextid + 1
end
function init(args)
  n = (id * 7919) %% keys
end
function request()
  local i = n
  n = n + 1
  if n == keys then n = 0 end
  local user
  if i %% 10 == 0 then user = "h" .. (math.floor(i / 10) %% heavy) else user = "u" .. i end
  local body
  if two then
    body = '{"domain":"' .. domain .. '","descriptors":[{"entries":[{"key":"user","value":"' .. user ..
      '"}]},{"entries":[{"key":"route","value":"r' .. (i %% 10) .. '"},{"key":"user","value":"' .. user .. '"}]}],"hitsAddend":1}'
  else
    body = '{"domain":"' .. domain .. '","descriptors":[{"entries":[{"key":"user","value":"' .. user .. '"}]}],"hitsAddend":1}'
  end
  return wrk.format("POST", "/json", {["Content-Type"] = "application/json"}, body)
end
`

// wrkScript returns the wrk script of d's requests over keys key indexes.
func (d serviceDomain) wrkScript(keys int) string {
	return fmt.Sprintf(wrkRequests, d.name, keys, serviceHeavyUsers, d.twoDescriptors)
}

// runJSON drives POST http://addr/json with wrk (2 threads, conns
// connections) for d. Both services answer OVER_LIMIT with 429, so the
// denied count is wrk's count of answers other than 2xx and 3xx; an error
// status (500, 503) would count there too, and show as denials beyond
// the expected number.
func runJSON(dom serviceDomain, addr string, conns, keys int, d time.Duration) (serviceLoad, error) {
	cpu0 := childrenCPU()
	r, err := runWrkScript(context.Background(), wrkLoad{threads: 2, connections: conns, duration: d},
		"http://"+addr+"/json", dom.wrkScript(keys))
	if err != nil {
		return serviceLoad{}, err
	}
	l := serviceLoad{requests: r.requests, allowed: r.requests - r.non2xx, denied: r.non2xx, failed: r.errors,
		elapsed: r.elapsed, p50: r.p50, p99: r.p99, clientCPU: childrenCPU() - cpu0}
	if r.errors > 0 {
		l.firstErr = fmt.Sprintf("%d connect, read, write or timeout errors (wrk)", r.errors)
	}
	return l, nil
}
