// Package envoytest holds envoyproxy/ratelimit's own test scenarios, its
// integration test's expectations and its example configuration's scripts,
// as data: requests and the answers sluice gives, so that one list is
// replayed in process (package decide's tests) and over gRPC against sluice
// serve --envoy-config (cmd/sluice's). The configuration files they use are
// envoyproxy/ratelimit's own, copied unchanged into
// internal/envoy/testdata/upstream (see its NOTICE).
package envoytest

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicerate/sluice/internal/envoy/decide"
)

// Dir returns the directory of upstream's files: "integration/config"
// (its integration test's runtime directory) or "examples/config" (its
// example configuration).
func Dir(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "upstream", filepath.FromSlash(name))
}

// Step is one request and what sluice answers.
type Step struct {
	// Name says where upstream makes the request.
	Name string

	Domain      string
	Descriptors [][][2]string // entries of each descriptor: {key, value}
	Hits        uint32
	Addends     map[int]uint64 // hits_addend of descriptors by index, when set

	// Quota, in a scenario run with dynamic metadata, is the name the
	// answer's metadata.service_with_quota carries: the service that still
	// has quota ("" for none).
	Quota string

	// Code is the overall code upstream expects.
	Code rlsv3.RateLimitResponse_Code

	// Want, when set, is the whole response sluice gives. Durations are
	// sluice's exact figures for a request made at the instant the
	// scenario starts; over a real clock a duration may be shorter by the
	// time the scenario has run.
	Want *rlsv3.RateLimitResponse

	// Differs says how sluice's answer differs from upstream's expectation
	// because windows slide; empty when upstream's expectation holds as it
	// is.
	Differs string
}

// Request returns the step's request.
func (s *Step) Request() *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: s.Domain, HitsAddend: s.Hits}
	for i, d := range s.Descriptors {
		desc := &ratelimitv3.RateLimitDescriptor{}
		for _, e := range d {
			desc.Entries = append(desc.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: e[0], Value: e[1]})
		}
		if h, ok := s.Addends[i]; ok {
			desc.HitsAddend = wrapperspb.UInt64(h)
		}
		req.Descriptors = append(req.Descriptors, desc)
	}
	return req
}

// Scenario is a list of steps over one configuration directory, from a
// fresh store.
type Scenario struct {
	Name     string
	Dir      string // for Dir
	Counting decide.Counting
	Steps    []Step

	// Metadata says the scenario runs with dynamic metadata
	// (RESPONSE_DYNAMIC_METADATA=true): each step's Quota is checked.
	Metadata bool
}

// status is a descriptor status as upstream's tests build them.
func status(code rlsv3.RateLimitResponse_Code, requests uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit, remaining uint32, reset time.Duration) *rlsv3.RateLimitResponse_DescriptorStatus {
	return &rlsv3.RateLimitResponse_DescriptorStatus{Code: code, CurrentLimit: &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: requests, Unit: unit},
		LimitRemaining: remaining, DurationUntilReset: durationpb.New(reset)}
}

func response(code rlsv3.RateLimitResponse_Code, st ...*rlsv3.RateLimitResponse_DescriptorStatus) *rlsv3.RateLimitResponse {
	return &rlsv3.RateLimitResponse{OverallCode: code, Statuses: st}
}

const (
	ok     = rlsv3.RateLimitResponse_OK
	over   = rlsv3.RateLimitResponse_OVER_LIMIT
	second = rlsv3.RateLimitResponse_RateLimit_SECOND
	minute = rlsv3.RateLimitResponse_RateLimit_MINUTE
	hour   = rlsv3.RateLimitResponse_RateLimit_HOUR
	day    = rlsv3.RateLimitResponse_RateLimit_DAY
	day1   = 24 * time.Hour
)

// Integration returns the expectations of upstream's integration test
// (test/integration/integration_test.go, testBasicBaseConfig and
// testShareThreshold) with its files, under counting: AllOrNothing is its
// run with STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, PerDescriptor its
// default.
func Integration(counting decide.Counting) Scenario {
	sc := Scenario{Name: "integration", Dir: "integration/config", Counting: counting}
	add := func(s Step) { sc.Steps = append(sc.Steps, s) }
	add(Step{Name: "unknown domain", Domain: "foo", Descriptors: [][][2]string{{{"hello", "world"}}}, Code: ok,
		Want: response(ok, &rlsv3.RateLimitResponse_DescriptorStatus{Code: ok})})
	add(Step{Name: "basic key1", Domain: "basic", Descriptors: [][][2]string{{{"key1", "foo"}}}, Code: ok,
		Want: response(ok, status(ok, 50, second, 49, time.Second))})
	for i := range 25 {
		s := Step{Name: fmt.Sprintf("another key2, hit %d", i+1), Domain: "another", Descriptors: [][][2]string{{{"key2", "7411"}}}}
		if i < 20 {
			s.Code, s.Want = ok, response(ok, status(ok, 20, minute, uint32(20-(i+1)), time.Minute))
		} else {
			s.Code, s.Want = over, response(over, status(over, 20, minute, 0, time.Minute))
		}
		add(s)
	}
	for i := range 15 {
		s := Step{Name: fmt.Sprintf("another key2 and key3, hit %d", i+1), Domain: "another",
			Descriptors: [][][2]string{{{"key2", "9230"}}, {{"key3", "9230"}}}}
		rem1, rem2 := uint32(20-(i+1)), uint32(10-(i+1))
		switch {
		case i < 10:
			s.Code, s.Want = ok, response(ok, status(ok, 20, minute, rem1, time.Minute), status(ok, 10, hour, rem2, time.Hour))
		case counting == decide.AllOrNothing:
			s.Code, s.Want = over, response(over, status(ok, 20, minute, 10, time.Minute), status(over, 10, hour, 0, time.Hour))
		default:
			s.Code, s.Want = over, response(over, status(ok, 20, minute, rem1, time.Minute), status(over, 10, hour, 0, time.Hour))
		}
		add(s)
	}
	add(Step{Name: "another key4, first", Domain: "another", Descriptors: [][][2]string{{{"key4", "durTest"}}}, Code: ok,
		Want: response(ok, status(ok, 20, day, 19, day1))})
	add(Step{Name: "another key4, second", Domain: "another", Descriptors: [][][2]string{{{"key4", "durTest"}}}, Code: ok,
		Want:    response(ok, status(ok, 20, day, 18, day1)),
		Differs: "duration_until_reset stays a full day (86400s) after each hit: a sliding window is empty a day after its newest hit, where upstream's fixed day counts down between the two hits (it expects the second below the first)"})
	for i := range 10 {
		add(Step{Name: fmt.Sprintf("share_threshold files/a.pdf, hit %d", i+1), Domain: "share-threshold-test",
			Descriptors: [][][2]string{{{"files", "files/a.pdf"}}}, Code: ok,
			Want: response(ok, status(ok, 10, hour, uint32(9-i), time.Hour))})
	}
	add(Step{Name: "share_threshold files/b.csv shares the threshold", Domain: "share-threshold-test",
		Descriptors: [][][2]string{{{"files", "files/b.csv"}}}, Code: over,
		Want: response(over, status(over, 10, hour, 0, time.Hour))})
	for i := range 10 {
		v := "files_no_share/" + strconv.Itoa(1000+i)
		add(Step{Name: "no share_threshold " + v, Domain: "share-threshold-test",
			Descriptors: [][][2]string{{{"files_no_share", v}}}, Code: ok,
			Want: response(ok, status(ok, 10, hour, 9, time.Hour))})
	}
	return sc
}

// Examples returns upstream's integration-test scripts
// (integration-test/scripts/*.sh, run in that order against one service)
// over its example configuration (examples/ratelimit/config), each curl
// turned into the request Envoy's example proxy (examples/envoy/proxy.yaml)
// sends for its headers: /twoheader sends (foo, bar) and (foo, baz),
// /fourheader (foo, bar) and (source_cluster, destination_cluster),
// /fiveheader those and (category), each only when all its headers are
// present.
func Examples() Scenario {
	sc := Scenario{Name: "examples", Dir: "examples/config"}
	step := func(name string, code rlsv3.RateLimitResponse_Code, descs ...[][2]string) {
		sc.Steps = append(sc.Steps, Step{Name: name, Domain: "rl", Descriptors: descs, Code: code})
	}
	fb := func(foo, bar string) [][2]string { return [][2]string{{"foo", foo}, {"bar", bar}} }
	fz := func(foo, baz string) [][2]string { return [][2]string{{"foo", foo}, {"baz", baz}} }
	sd := func(dst string) [][2]string {
		return [][2]string{{"source_cluster", "proxy"}, {"destination_cluster", dst}}
	}
	account := [][2]string{{"category", "account"}}

	// replaces.sh
	step("replaces: banned_limit blocks", over, fb("bkthomps", "banned"))
	step("replaces: banned with mock", over, fb("bkthomps", "banned"), sd("mock"))
	step("replaces: override replaces banned_limit, 1", ok, fb("bkthomps", "banned"), sd("override"))
	step("replaces: override replaces banned_limit, 2", ok, fb("bkthomps", "banned"), sd("override"))
	step("replaces: override replaces banned_limit, 3", over, fb("bkthomps", "banned"), sd("override"))
	step("replaces: bkthomps replaced, 1", ok, fb("my_foo", "bkthomps"), sd("bkthomps"))
	step("replaces: bkthomps replaced, 2", ok, fb("my_foo", "bkthomps"), sd("bkthomps"))
	step("replaces: bkthomps replaced, 3", over, fb("my_foo", "bkthomps"), sd("bkthomps"))
	step("replaces: original limit kept, 1", ok, fb("my_foo", "bkthomps"), sd("not_bkthomps"))
	step("replaces: original limit kept, 2", over, fb("my_foo", "bkthomps"), sd("not_bkthomps"))
	step("replaces: replacing limit still full", over, fb("my_foo", "bkthomps"), sd("bkthomps"))
	for i := range 4 {
		step(fmt.Sprintf("replaces: two limits replaced, %d", i+1), ok, fb("my_foo", "bkthomps"), sd("fake"), account)
	}
	step("replaces: two limits replaced, 5", over, fb("my_foo", "bkthomps"), sd("fake"), account)
	step("replaces: foo_2 bkthomps, 1", ok, fb("foo_2", "bkthomps"))
	step("replaces: foo_2 bkthomps, 2", over, fb("foo_2", "bkthomps"))
	step("replaces: fake_name, 1", ok, fb("foo_3", "bar_3"), sd("fake"))
	step("replaces: fake_name, 2", ok, fb("foo_3", "bar_3"), sd("fake"))
	step("replaces: fake_name, 3", over, fb("foo_3", "bar_3"), sd("fake"))
	step("replaces: category still full", over, fb("my_foo", "bkthomps"), sd("fake"), account)
	// simple-get.sh
	step("simple-get", ok, fz("test", "shady"))
	// trigger-ratelimit.sh
	for i := range 3 {
		step(fmt.Sprintf("trigger-ratelimit, %d", i+1), ok, fz("pelle", "not-so-shady"))
	}
	step("trigger-ratelimit, 4", over, fz("pelle", "not-so-shady"))
	step("trigger-ratelimit, 5", over, fz("pelle", "not-so-shady"))
	// trigger-shadow-mode-key.sh: never limited; over the limit, its status
	// reports 0 remaining, as upstream's does.
	for i := range 5 {
		step(fmt.Sprintf("trigger-shadow-mode-key, %d", i+1), ok, fz("pelle", "shady"))
	}
	sc.Steps = append(sc.Steps, Step{Name: "trigger-shadow-mode-key, 6", Domain: "rl", Descriptors: [][][2]string{fz("pelle", "shady")}, Code: ok,
		Want: response(ok, status(ok, 3, minute, 0, time.Minute))})
	// value-included-in-stats-key-when-unspecified.sh
	sc.Steps = append(sc.Steps,
		Step{Name: "unspec, 1", Domain: "rl", Descriptors: [][][2]string{{{"unspec", "unspecified_value"}}}, Code: ok},
		Step{Name: "unspec, 2", Domain: "rl", Descriptors: [][][2]string{{{"unspec", "unspecified_value"}}}, Code: ok},
		Step{Name: "unspec, 3", Domain: "rl", Descriptors: [][][2]string{{{"unspec", "unspecified_value"}}}, Code: over})
	// config.yaml's domain.
	sc.Steps = append(sc.Steps, Step{Name: "mongo_cps users", Domain: "mongo_cps", Descriptors: [][][2]string{{{"database", "users"}}}, Code: ok,
		Want: response(ok, status(ok, 500, second, 499, time.Second))})
	return sc
}

// Quota returns upstream's quota scripts over its example configuration
// (integration-test/scripts/quota.sh, token-quota.sh and
// multiservice-tokenquota.sh), each on a fresh store, with dynamic
// metadata: service_1 and service_2, each in quota_mode, 1 and 2 a minute,
// each with metadata naming it. A request goes through while one of its
// quota descriptors has room, and the metadata names the first that does,
// for Envoy to route to it. The token quotas count the cost after the
// response (a descriptor of hits_addend 0 on the request's path, one of 1
// when the stream is done), so they run in upstream's counting,
// PerDescriptor: all-or-nothing would refuse the cost that overflows.
func Quota() []Scenario {
	svc := func(names ...string) [][][2]string {
		var d [][][2]string
		for _, n := range names {
			d = append(d, [][2]string{{"service", n}})
		}
		return d
	}
	step := func(name string, code rlsv3.RateLimitResponse_Code, quota string, descs [][][2]string, addends ...uint64) Step {
		s := Step{Name: name, Domain: "rl", Descriptors: descs, Code: code, Quota: quota}
		if len(addends) > 0 {
			s.Addends = map[int]uint64{}
			for i, h := range addends {
				s.Addends[i] = h
			}
		}
		return s
	}
	quota := Scenario{Name: "quota", Dir: "examples/config", Metadata: true, Steps: []Step{
		step("quota: both have room", ok, "service_1", svc("service_1", "service_2")),
		step("quota: service_1 is out, service_2 has room", ok, "service_2", svc("service_1", "service_2")),
		step("quota: both are out", over, "", svc("service_1", "service_2")),
	}}
	token := Scenario{Name: "token-quota", Dir: "examples/config", Counting: decide.PerDescriptor, Metadata: true}
	for i, resp := range []rlsv3.RateLimitResponse_Code{ok, ok, over} {
		respQuota := "service_2"
		if resp == over {
			respQuota = "" // the cost overflows; Envoy ignores the answer
		}
		token.Steps = append(token.Steps,
			step(fmt.Sprintf("token-quota: request %d", i+1), ok, "service_2", svc("service_2"), 0),
			step(fmt.Sprintf("token-quota: response %d", i+1), resp, respQuota, svc("service_2"), 1))
	}
	token.Steps = append(token.Steps, step("token-quota: request 4, over", over, "", svc("service_2"), 0))
	multi := Scenario{Name: "multiservice-tokenquota", Dir: "examples/config", Counting: decide.PerDescriptor, Metadata: true}
	for i, served := range []string{"service_1", "service_1", "service_2", "service_2", "service_2"} {
		resp, respQuota := ok, served
		if i == 1 || i == 4 {
			resp, respQuota = over, "" // the cost overflows; Envoy ignores the answer
		}
		multi.Steps = append(multi.Steps,
			step(fmt.Sprintf("multiservice: request %d, served by %s", i+1, served), ok, served, svc("service_1", "service_2"), 0, 0),
			step(fmt.Sprintf("multiservice: response %d", i+1), resp, respQuota, svc(served), 1))
	}
	multi.Steps = append(multi.Steps, step("multiservice: request 6, both out", over, "", svc("service_1", "service_2"), 0, 0))
	return []Scenario{quota, token, multi}
}

// Call answers one request: in process, or over gRPC.
type Call func(*rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error)

// Run replays sc with call and reports each step that answers otherwise.
// With realClock, durations may be shorter than sluice's figure at the
// scenario's start by the whole seconds the scenario has run; otherwise
// they are exact. It returns how many steps passed and how many of those
// differ from upstream because windows slide.
func Run(t *testing.T, sc Scenario, call Call, realClock bool) (passed, differ int) {
	t.Helper()
	start := time.Now()
	for i := range sc.Steps {
		s := &sc.Steps[i]
		got, err := call(s.Request())
		if err != nil {
			t.Errorf("%s: step %d (%s): %v", sc.Name, i+1, s.Name, err)
			continue
		}
		if got.GetOverallCode() != s.Code {
			t.Errorf("%s: step %d (%s): overall code %v, want %v; response %v", sc.Name, i+1, s.Name, got.GetOverallCode(), s.Code, got)
			continue
		}
		if q := got.GetDynamicMetadata().GetFields()["metadata"].GetStructValue().GetFields()["service_with_quota"].GetStructValue().GetFields()["name"].GetStringValue(); sc.Metadata && q != s.Quota {
			t.Errorf("%s: step %d (%s): the service with quota is %q, want %q; dynamic metadata %v", sc.Name, i+1, s.Name, q, s.Quota, got.GetDynamicMetadata())
			continue
		}
		if s.Want != nil {
			slack := time.Duration(0)
			if realClock {
				slack = time.Since(start).Truncate(time.Second) + time.Second
			}
			if msg := compare(got, s.Want, slack); msg != "" {
				t.Errorf("%s: step %d (%s): %s\n got %v\nwant %v", sc.Name, i+1, s.Name, msg, got, s.Want)
				continue
			}
		}
		passed++
		if s.Differs != "" {
			differ++
		}
	}
	return passed, differ
}

// compare reports how got differs from want, durations allowed to be
// shorter by up to slack.
func compare(got, want *rlsv3.RateLimitResponse, slack time.Duration) string {
	if len(got.GetStatuses()) != len(want.GetStatuses()) {
		return fmt.Sprintf("%d statuses, want %d", len(got.GetStatuses()), len(want.GetStatuses()))
	}
	g := proto.Clone(got).(*rlsv3.RateLimitResponse)
	for i, st := range g.Statuses {
		w := want.Statuses[i]
		gd, wd := st.GetDurationUntilReset().AsDuration(), w.GetDurationUntilReset().AsDuration()
		if st.DurationUntilReset == nil && w.DurationUntilReset == nil {
			continue
		}
		if gd > wd || gd < wd-slack {
			return fmt.Sprintf("status %d: duration_until_reset %v, want %v (at most %v less)", i+1, gd, wd, slack)
		}
		st.DurationUntilReset = w.DurationUntilReset
	}
	if !proto.Equal(g, want) {
		return "the responses differ"
	}
	return ""
}
