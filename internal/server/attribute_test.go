package server

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

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
	loadEnvoy(t, ts.srv, EnvoyOptions{}, map[string]string{"edge.yaml": edgeEnvoy})
	ctx := context.Background()

	// Over the wire, as a client that does not check UTF-8 sends them.
	// protobuf refuses to decode such a request, which grpc-go's codec
	// answers INTERNAL; sluice serve's codec lets it through to the
	// handlers, which answer INVALID_ARGUMENT naming the field or attribute.
	conn := grpcConn(t, ts)
	attr := func(k, v string) []byte { return wireMessage(2, wireString(1, k), wireString(2, v)) }
	entry := func(k, v string) []byte { return wireMessage(1, wireString(1, k), wireString(2, v)) }
	const (
		decide = sluicev1.Sluice_Decide_FullMethodName
		rls    = rlsv3.RateLimitService_ShouldRateLimit_FullMethodName
	)
	invoke := func(method string, fields ...[]byte) error {
		req := bytes.Join(fields, nil)
		var out []byte
		return conn.Invoke(ctx, method, &req, &out, grpc.ForceCodecV2(rawCodec{}))
	}
	for _, user := range []string{"\xff", "\xfe"} {
		err := invoke(decide, wireString(1, "api"), attr("user", user), attr("path", "/"))
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), `"user" is not valid UTF-8`) {
			t.Errorf("Decide of user %q: %v, want InvalidArgument naming user", user, err)
		}
		err = invoke(sluicev1.Sluice_Reserve_FullMethodName, wireString(1, "carrier"), attr("carrier", user))
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("Reserve of carrier %q: %v, want InvalidArgument", user, err)
		}
		err = invoke(rls, wireString(1, "api"), wireMessage(2, entry("user", user)), wireMessage(2, entry("path", "/")))
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), `"user" is not valid UTF-8`) {
			t.Errorf("ShouldRateLimit of user %q: %v, want InvalidArgument naming user", user, err)
		}
	}

	tests := []struct {
		name, method string
		req          [][]byte
		want         string
	}{
		{"decide", decide, [][]byte{wireString(1, "api"), attr("user", "\xff"), attr("path", "/")}, `"user" is not valid UTF-8`},
		{"decide other byte", decide, [][]byte{wireString(1, "api"), attr("user", "a\xfe"), attr("path", "/")}, `"user" is not valid UTF-8`},
		{"peek", sluicev1.Sluice_Peek_FullMethodName, [][]byte{wireString(1, "api"), attr("user", "\xff"), attr("path", "/")}, `"user" is not valid UTF-8`},
		{"record", sluicev1.Sluice_Record_FullMethodName, [][]byte{wireString(1, "api"), attr("path", "\xc3"), attr("user", "u")}, `"path" is not valid UTF-8`},
		{"attribute name", decide, [][]byte{wireString(1, "api"), attr("user", "u"), attr("path", "/"), attr("x\xff", "b")}, `"x\xff" is not valid UTF-8`},
		{"attribute no rule reads", decide, [][]byte{wireString(1, "api"), attr("user", "u"), attr("path", "/"), attr("note", "\xff")}, `"note" is not valid UTF-8`},
		{"two attributes", decide, [][]byte{wireString(1, "api"), attr("user", "\xff"), attr("path", "\xff")}, `"path" is not valid UTF-8`},
		{"policy", decide, [][]byte{wireString(1, "api\xff"), attr("user", "u"), attr("path", "/")}, `the "policy" field is not valid UTF-8`},
		{"reserve schedule", sluicev1.Sluice_Reserve_FullMethodName, [][]byte{wireString(1, "carrier\xff"), attr("carrier", "45")}, `the "schedule" field is not valid UTF-8`},
		{"reserve attribute", sluicev1.Sluice_Reserve_FullMethodName, [][]byte{wireString(1, "carrier"), attr("carrier", "\xff")}, `"carrier" is not valid UTF-8`},
		{"cancel schedule", sluicev1.Sluice_Cancel_FullMethodName, [][]byte{wireString(1, "\xff"), attr("carrier", "45"), wireString(3, "x")}, `the "schedule" field is not valid UTF-8`},
		{"cancel attribute", sluicev1.Sluice_Cancel_FullMethodName, [][]byte{wireString(1, "carrier"), attr("carrier", "\xfe"), wireString(3, "x")}, `"carrier" is not valid UTF-8`},
		{"cancel id", sluicev1.Sluice_Cancel_FullMethodName, [][]byte{wireString(1, "carrier"), attr("carrier", "45"), wireString(3, "x\xff")}, `the "id" field is not valid UTF-8`},
		{"envoy domain", rls, [][]byte{wireString(1, "api\xff"), wireMessage(2, entry("user", "u"))}, `the "domain" field is not valid UTF-8`},
		{"envoy entry", rls, [][]byte{wireString(1, "api"), wireMessage(2, entry("user", "\xff")), wireMessage(2, entry("path", "/"))}, `"user" is not valid UTF-8`},
		{"envoy entry key", rls, [][]byte{wireString(1, "api"), wireMessage(2, entry("user", "u"), entry("\xff", "v"))}, `"\xff" is not valid UTF-8`},
		{"envoy model entry", rls, [][]byte{wireString(1, "edge"), wireMessage(2, entry("user", "\xfe"))}, `"user" is not valid UTF-8`},
	}
	for _, tt := range tests {
		t.Run("wire/"+tt.name, func(t *testing.T) {
			req := bytes.Join(tt.req, nil)
			var out []byte
			err := conn.Invoke(ctx, tt.method, &req, &out, grpc.ForceCodecV2(rawCodec{}))
			if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tt.want) {
				t.Errorf("%v, want InvalidArgument with %q", err, tt.want)
			}
		})
	}

	// Nothing was recorded. Valid requests are answered as before, sent as
	// raw bytes or by the generated clients.
	client := sluicev1.NewSluiceClient(conn)
	if d, err := client.Peek(ctx, &sluicev1.DecideRequest{Policy: "api", Attributes: map[string]string{"user": "\ufffd", "path": "/"}}); err != nil || d.Limits[0].Used != 1 || d.Limits[1].Used != 1 {
		t.Errorf("U+FFFD's windows: %v, %v; want nothing recorded", d, err)
	}
	req := bytes.Join([][]byte{wireString(1, "api"), attr("user", "\ufffd"), attr("path", "/ünï")}, nil)
	var out []byte
	if err := conn.Invoke(ctx, decide, &req, &out, grpc.ForceCodecV2(rawCodec{})); err != nil {
		t.Fatalf("valid raw request: %v", err)
	}
	var d sluicev1.Decision
	if err := proto.Unmarshal(out, &d); err != nil || !d.Allowed || d.Limits[0].Used != 1 {
		t.Errorf("valid raw request: %v, %v; want allowed, the first in its window", &d, err)
	}
	if d, err := client.Peek(ctx, &sluicev1.DecideRequest{Policy: "api", Attributes: map[string]string{"user": "\ufffd", "path": "/"}}); err != nil || d.Limits[0].Used != 2 {
		t.Errorf("U+FFFD's window: %v, %v; want the valid request alone recorded", d, err)
	}
	rl, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("user", "\ufffd")}})
	if err != nil || rl.OverallCode != rlsv3.RateLimitResponse_OK || rl.Statuses[0].LimitRemaining != 1 {
		t.Errorf("Envoy model's U+FFFD: %v, %v; want OK with 1 left", rl, err)
	}

	// Other services keep grpc-go's answer: their handlers do not check.
	bad := wireString(1, "\xff")
	if err := conn.Invoke(ctx, healthpb.Health_Check_FullMethodName, &bad, &out, grpc.ForceCodecV2(rawCodec{})); status.Code(err) != codes.Internal {
		t.Errorf("health check of service \\xff: %v, want Internal from grpc-go's codec", err)
	}
}

// wireString encodes a string field with its bytes as given.
func wireString(num protowire.Number, s string) []byte {
	return protowire.AppendString(protowire.AppendTag(nil, num, protowire.BytesType), s)
}

// wireMessage encodes a message field of the fields given.
func wireMessage(num protowire.Number, fields ...[]byte) []byte {
	return wireString(num, string(bytes.Join(fields, nil)))
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
