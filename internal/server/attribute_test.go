package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sluicerate/sluice/httplimit"
	sluicev1 "github.com/sluicerate/sluice/proto/sluice/v1"
)

// Attribute values are text on every protocol: bytes that are not UTF-8
// are bad input, never replaced by U+FFFD (which would make "\xff" and
// "\xfe" one user).

func TestJSONAttributeNotUTF8(t *testing.T) {
	ts := newTestServer(t, testConfig)
	tests := []struct {
		name, path, body string
		code, detail     string
	}{
		{"byte", "/v1/decide", `{"policy":"notify","attributes":{"category":"` + "\xff" + `"}}`, "invalid_attribute", `"category" is not valid UTF-8`},
		{"other byte", "/v1/decide", `{"policy":"notify","attributes":{"category":"` + "a\xfe" + `"}}`, "invalid_attribute", `"category" is not valid UTF-8`},
		{"lone surrogate", "/v1/peek", `{"policy":"notify","attributes":{"category":"\ud800"}}`, "invalid_attribute", `"category"`},
		{"low surrogate first", "/v1/record", `{"policy":"notify","attributes":{"category":"\udc00\ud800"}}`, "invalid_attribute", `"category"`},
		{"in a name", "/v1/decide", `{"policy":"notify","attributes":{"category":"a","x` + "\xff" + `":"b"}}`, "invalid_attribute", "not valid UTF-8"},
		{"in the policy", "/v1/decide", `{"policy":"notify` + "\xff" + `","attributes":{"category":"a"}}`, "malformed_json", "not UTF-8 text at byte 17"},
		{"reserve", "/v1/reserve", `{"schedule":"carrier","attributes":{"carrier":"` + "\xff" + `"}}`, "invalid_attribute", `"carrier"`},
		{"cancel", "/v1/cancel", `{"schedule":"carrier","attributes":{"carrier":"\udfff"},"id":"x"}`, "invalid_attribute", `"carrier"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := ts.do("POST", tt.path, tt.body)
			var p httplimit.Problem
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != 400 {
				t.Fatalf("%d %s, want 400", w.Code, w.Body)
			}
			if p.Code != tt.code || !strings.Contains(p.Detail, tt.detail) {
				t.Errorf("problem %+v, want %s with %q", p, tt.code, tt.detail)
			}
		})
	}
	// A pair, U+FFFD itself and other text are fine.
	for _, c := range []string{`"\ud83d\ude00"`, `"\ufffd"`, `"` + "\uFFFD" + `"`, `"\\ud800"`, `"ünï"`} {
		d := ts.decide("/v1/decide", `{"policy":"notify","attributes":{"category":`+c+`}}`)
		if !d.Allowed {
			t.Errorf("category %s: %+v", c, d)
		}
	}
	// Nothing was recorded by the bad requests: the global window holds the
	// five good ones.
	if d := ts.decide("/v1/peek", `{"policy":"notify","attributes":{"category":"b"}}`); d.Allowed || d.Limits[0].Used != 5 {
		t.Errorf("global window %+v, want the 5 good requests only", d.Limits[0])
	}
}

func TestForwardAuthAttributeNotUTF8(t *testing.T) {
	ts := newTestServer(t, testConfig)
	for _, user := range []string{"\xff", "\xfe"} {
		w := ts.do("GET", "/v1/forward-auth?policy=edge", "", "X-Forwarded-For", "203.0.113.7", "X-User-Id", user)
		var p httplimit.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != 400 || p.Code != "invalid_attribute" || !strings.Contains(p.Detail, `"user"`) {
			t.Errorf("user %q: %d %s, want 400 invalid_attribute naming user", user, w.Code, w.Body)
		}
	}
	// A header the policy does not read is not checked.
	w := ts.do("GET", "/v1/forward-auth?policy=notify", "", "X-Forwarded-Host", "\xff", "X-User-Id", "\xff")
	if w.Code != 400 || !strings.Contains(w.Body.String(), "missing_attribute") {
		t.Errorf("notify = %d %s, want 400 for its own missing category only", w.Code, w.Body)
	}
}

func TestGRPCAttributeNotUTF8(t *testing.T) {
	ts := newTestServer(t, grpcConfig)
	ctx := context.Background()
	sluiceSvc, envoySvc := &sluiceService{s: ts.srv}, &envoyService{s: ts.srv}
	for _, user := range []string{"\xff", "\xfe"} {
		_, err := sluiceSvc.Decide(ctx, &sluicev1.DecideRequest{Policy: "api", Attributes: map[string]string{"user": user, "path": "/"}})
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), `"user" is not valid UTF-8`) {
			t.Errorf("Decide of user %q: %v, want InvalidArgument naming user", user, err)
		}
		_, err = sluiceSvc.Reserve(ctx, &sluicev1.ReserveRequest{Schedule: "carrier", Attributes: map[string]string{"carrier": user}})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("Reserve of carrier %q: %v, want InvalidArgument", user, err)
		}
		_, err = envoySvc.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			descriptor("user", user), descriptor("path", "/")}})
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), `"user" is not valid UTF-8`) {
			t.Errorf("ShouldRateLimit of user %q: %v, want InvalidArgument naming user", user, err)
		}
	}

	// Over the wire, protobuf itself refuses a string field that is not
	// UTF-8: the call fails before sluice sees it (INTERNAL, from gRPC's
	// codec).
	conn := grpcConn(t, ts)
	var raw []byte
	entry := protowire.AppendTag(nil, 1, protowire.BytesType)
	entry = protowire.AppendString(entry, "user")
	entry = protowire.AppendTag(entry, 2, protowire.BytesType)
	entry = protowire.AppendString(entry, "\xff")
	raw = protowire.AppendTag(raw, 1, protowire.BytesType)
	raw = protowire.AppendString(raw, "api")
	raw = protowire.AppendTag(raw, 2, protowire.BytesType)
	raw = protowire.AppendBytes(raw, entry)
	var out []byte
	err := conn.Invoke(ctx, sluicev1.Sluice_Decide_FullMethodName, &raw, &out, grpc.ForceCodecV2(rawCodec{}))
	if status.Code(err) == codes.OK {
		t.Errorf("a raw request with user \\xff was answered OK")
	}
	if d, err := sluiceSvc.Peek(ctx, &sluicev1.DecideRequest{Policy: "api", Attributes: map[string]string{"user": "\ufffd", "path": "/"}}); err != nil || d.Limits[0].Used != 1 {
		t.Errorf("U+FFFD's window: %v, %v; want nothing recorded", d, err)
	}
}

// rawCodec sends and receives messages as bytes, unchecked, as a client of
// another language may.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }
