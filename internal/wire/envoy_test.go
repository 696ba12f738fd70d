package wire

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// envoyCommonBodies are bodies of the common shape, which DecodeEnvoy
// decodes itself.
var envoyCommonBodies = []string{
	`{"domain":"one","descriptors":[{"entries":[{"key":"user","value":"u42"}]}]}`,
	`{"domain":"one","descriptors":[{"entries":[{"key":"user","value":"u42"}]}],"hitsAddend":1}`,
	`{"domain":"two","descriptors":[{"entries":[{"key":"user","value":"u42"}]},{"entries":[{"key":"route","value":"r2"},{"key":"user","value":"u42"}]}],"hitsAddend":1}`,
	`{"hits_addend":3,"descriptors":[{"entries":[{"value":"v","key":"k"}]}],"domain":"d"}`,
	`{"domain":"d","hitsAddend":0}`,
	`{"domain":"d","hitsAddend":4294967295}`,
	`{}`,
	`{"domain":""}`,
	`{"descriptors":[]}`,
	`{"descriptors":[{}]}`,
	`{"descriptors":[{},{"entries":[]},{"entries":[{}]},{"entries":[{"key":"k"},{"value":"v"}]}]}`,
	" \t\r\n{ \"domain\" : \"d\" ,\n\"descriptors\" : [ { \"entries\" : [ { \"key\" : \"k\" , \"value\" : \"v\" } , { \"key\":\"k2\",\"value\":\"\" } ] } , { } ] , \"hitsAddend\" : 7 } \n",
	`{"domain":"d\"q\\b\/s\b\f\n\r\t\u0000\u001f\u00e9\u20ac\ud83d\ude00","descriptors":[{"entries":[{"key":"\u006b","value":"é€😀"}]}]}`,
	`{"dom\u0061in":"d","hits\u005faddend":2}`,
	"{\"domain\":\"\u2028\u2029\x7f<>&\ufffd\"}",
}

// envoyOtherBodies are bodies protojson decodes or rejects, left to it.
var envoyOtherBodies = []string{
	``,
	` `,
	`null`,
	`[]`,
	`"domain"`,
	`{`,
	`{"domain":"d"`,
	`{"domain":"d",}`,
	`{"domain":"d"}x`,
	`{"domain":"d"}{}`,
	`{"domain":"d"} null`,
	`{"domain":null}`,
	`{"descriptors":null}`,
	`{"hitsAddend":null}`,
	`{"descriptors":[null]}`,
	`{"descriptors":[{"entries":null}]}`,
	`{"descriptors":[{"entries":[null]}]}`,
	`{"descriptors":[{"entries":[{"key":null,"value":"v"}]}]}`,
	`{"domain":"a","domain":"b"}`,
	`{"hitsAddend":1,"hits_addend":2}`,
	`{"hits_addend":1,"hits_addend":1}`,
	`{"descriptors":[],"descriptors":[]}`,
	`{"descriptors":[{"entries":[],"entries":[]}]}`,
	`{"descriptors":[{"entries":[{"key":"a","key":"b"}]}]}`,
	`{"descriptors":[{"entries":[{"value":"a","value":"b"}]}]}`,
	`{"Domain":"d"}`,
	`{"DOMAIN":"d"}`,
	`{"domain ":"d"}`,
	`{"HitsAddend":1}`,
	`{"hitsaddend":1}`,
	`{"other":1}`,
	`{"domain":"d","unknown":"x"}`,
	`{"descriptors":[{"limit":{"requestsPerUnit":5,"unit":"SECOND"},"entries":[]}]}`,
	`{"descriptors":[{"hitsAddend":2}]}`,
	`{"descriptors":[{"hits_addend":"2"}]}`,
	`{"descriptors":[{"isNegativeHits":true}]}`,
	`{"descriptors":[{"is_negative_hits":false}]}`,
	`{"descriptors":[{"entries":[{"key":"k","value":"v","extra":1}]}]}`,
	`{"hitsAddend":"1"}`,
	`{"hitsAddend":"  1"}`,
	`{"hitsAddend":1.0}`,
	`{"hitsAddend":1.5}`,
	`{"hitsAddend":1e2}`,
	`{"hitsAddend":1E0}`,
	`{"hitsAddend":-0}`,
	`{"hitsAddend":-1}`,
	`{"hitsAddend":01}`,
	`{"hitsAddend":+1}`,
	`{"hitsAddend":4294967296}`,
	`{"hitsAddend":18446744073709551615}`,
	`{"hitsAddend":99999999999999999999999}`,
	`{"hitsAddend":1x}`,
	`{"hitsAddend":true}`,
	`{"domain":1}`,
	`{"domain":true}`,
	`{"domain":["d"]}`,
	`{"domain":{}}`,
	`{"descriptors":{}}`,
	`{"descriptors":[[]]}`,
	`{"descriptors":[{"entries":{}}]}`,
	`{"descriptors":[{"entries":[{"key":1}]}]}`,
	`{"descriptors":[{"entries":[{"key":"k"}],}]}`,
	`{"descriptors":[{"entries":[{"key":"k"},]}]}`,
	`{"descriptors":[{},]}`,
	`{"domain":'d'}`,
	`{domain:"d"}`,
	"{\"domain\":\"a\x00b\"}",
	"{\"domain\":\"a\nb\"}",
	"{\"domain\":\"a\x1fb\"}",
	"{\"domain\":\"\xff\"}",
	"{\"domain\":\"\xc3\"}",
	"{\"domain\":\"\xed\xa0\x80\"}",
	"{\"do\xffmain\":\"d\"}",
	`{"domain":"\ud800"}`,
	`{"domain":"\udc00"}`,
	`{"domain":"\ud800\u0041"}`,
	`{"domain":"\ud800\ud800"}`,
	`{"domain":"\ud83d\ude0"}`,
	`{"domain":"\u00e"}`,
	`{"domain":"\u00eg"}`,
	`{"domain":"\x41"}`,
	`{"domain":"\a"}`,
	`{"domain":"\U00e9"}`,
	`{"domain":"\`,
	`{"domain":"abc`,
	"\xef\xbb\xbf{\"domain\":\"d\"}",
	"{\"domain\":\"d\"}\x00",
	"{\"domain\"\v:\"d\"}",
	"{\"domain\":\"d\"}\f",
	`{"@type":"x","domain":"d"}`,
	`{"[envoy.ext]":1}`,
	`{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}]}],"hitsAddend":1,"x":null}`,
}

// checkEnvoyDecoder checks DecodeEnvoy against protojson.Unmarshal on body:
// what it decodes, protojson decodes to an equal message; what protojson
// rejects, it does not decode, leaving the message as it was. The strings
// it decodes must outlive the scratch memory, so the scratch decodes
// another body before the message is compared.
func checkEnvoyDecoder(t *testing.T, body []byte) (decoded bool) {
	t.Helper()
	sc := GetScratch()
	defer PutScratch(sc)
	got := &rlsv3.RateLimitRequest{}
	decoded = sc.DecodeEnvoy(slices.Clone(body), got)
	if !sc.DecodeEnvoy([]byte(`{"domain":"xxxxxxxxxxxxxxxx","descriptors":[{"entries":[{"key":"yyyyyyyyyyyyyyyy","value":"zzzzzzzzzzzzzzzzzzzzzzz"}]}]}`), &rlsv3.RateLimitRequest{}) {
		t.Fatal("the scratch decodes nothing after the body")
	}
	want := &rlsv3.RateLimitRequest{}
	err := protojson.Unmarshal(body, want)
	switch {
	case decoded && err != nil:
		t.Fatalf("body %q: decoded to %v; protojson rejects it: %v", body, got, err)
	case decoded && !proto.Equal(got, want):
		t.Fatalf("body %q: decoded to %v; protojson decodes %v", body, got, want)
	case !decoded && !proto.Equal(got, &rlsv3.RateLimitRequest{}):
		t.Fatalf("body %q: not decoded, but the message is %v", body, got)
	}
	return decoded
}

func TestEnvoyJSONDecode(t *testing.T) {
	for _, body := range envoyCommonBodies {
		if !checkEnvoyDecoder(t, []byte(body)) {
			t.Errorf("%q is left to protojson", body)
		}
	}
	for _, body := range envoyOtherBodies {
		if checkEnvoyDecoder(t, []byte(body)) {
			t.Errorf("%q is decoded, not left to protojson", body)
		}
	}
}

// FuzzEnvoyJSONDecode checks DecodeEnvoy against protojson.Unmarshal (see
// checkEnvoyDecoder).
func FuzzEnvoyJSONDecode(f *testing.F) {
	for _, body := range slices.Concat(envoyCommonBodies, envoyOtherBodies) {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkEnvoyDecoder(t, body) })
}

// envoyTexts are strings for the encoder's tests: every escape, text that
// is not ASCII, and text protojson refuses (not UTF-8).
var envoyTexts = []string{
	"", "a", "user", "x-ratelimit-limit", `"quoted"`, `back\slash`, "tab\tnew\nline\rret\bbs\fff", "\x00\x01\x1f\x7f",
	"<script>&amp;</script>", "é€😀", "\u2028\u2029", "\ufffd", `100, 100;w=60`, "\xff", "a\xc3", "\xed\xa0\x80",
}

// checkEnvoyEncoder checks AppendEnvoyResponse against protojson.Marshal
// on r: where it encodes, its JSON has the value of protojson's, and
// protojson decodes it back to r; where it does not, it appends nothing.
// It returns whether r was encoded.
func checkEnvoyEncoder(t *testing.T, r *rlsv3.RateLimitResponse) bool {
	t.Helper()
	got, ok := AppendEnvoyResponse([]byte("prefix"), r)
	if !bytes.HasPrefix(got, []byte("prefix")) {
		t.Fatalf("%v: the prefix is lost: %q", r, got)
	}
	got = got[len("prefix"):]
	want, err := protojson.Marshal(r)
	if !ok {
		if len(got) > 0 {
			t.Fatalf("%v: not encoded, but %q is appended", r, got)
		}
		return false
	}
	if err != nil {
		t.Fatalf("%v: encoded as %s; protojson refuses it: %v", r, got, err)
	}
	var gotValue, wantValue any
	if err := json.Unmarshal(got, &gotValue); err != nil {
		t.Fatalf("%v: encoded as %q, not JSON: %v", r, got, err)
	}
	if err := json.Unmarshal(want, &wantValue); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotValue, wantValue) {
		t.Fatalf("%v: encoded as\n%s\nprotojson:\n%s", r, got, want)
	}
	back := &rlsv3.RateLimitResponse{}
	if err := protojson.Unmarshal(got, back); err != nil {
		t.Fatalf("%v: encoded as %s, which protojson does not decode: %v", r, got, err)
	}
	if !proto.Equal(back, r) {
		t.Fatalf("%v: encoded as %s, which protojson decodes to %v", r, got, back)
	}
	return true
}

func TestAppendEnvoyResponse(t *testing.T) {
	const (
		ok   = rlsv3.RateLimitResponse_OK
		over = rlsv3.RateLimitResponse_OVER_LIMIT
	)
	limit := func(name string, n uint32, u rlsv3.RateLimitResponse_RateLimit_Unit) *rlsv3.RateLimitResponse_RateLimit {
		return &rlsv3.RateLimitResponse_RateLimit{Name: name, RequestsPerUnit: n, Unit: u}
	}
	dur := func(s int64, n int32) *durationpb.Duration { return &durationpb.Duration{Seconds: s, Nanos: n} }
	status := func(code rlsv3.RateLimitResponse_Code, l *rlsv3.RateLimitResponse_RateLimit, remaining uint32, d *durationpb.Duration) *rlsv3.RateLimitResponse_DescriptorStatus {
		return &rlsv3.RateLimitResponse_DescriptorStatus{Code: code, CurrentLimit: l, LimitRemaining: remaining, DurationUntilReset: d}
	}
	one := func(st *rlsv3.RateLimitResponse_DescriptorStatus) *rlsv3.RateLimitResponse {
		return &rlsv3.RateLimitResponse{OverallCode: st.Code, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{st}}
	}
	headers := func(kv ...string) []*corev3.HeaderValue {
		var hs []*corev3.HeaderValue
		for i := 0; i+1 < len(kv); i += 2 {
			hs = append(hs, &corev3.HeaderValue{Key: kv[i], Value: kv[i+1]})
		}
		return hs
	}
	encoded := []*rlsv3.RateLimitResponse{
		{},
		{OverallCode: ok},
		{OverallCode: over},
		{OverallCode: 7},
		{OverallCode: -1},
		one(status(ok, nil, 0, nil)),
		one(status(0, nil, 0, nil)),
		one(status(ok, nil, math.MaxUint32, nil)),
		one(status(ok, limit("per-user", 100, rlsv3.RateLimitResponse_RateLimit_MINUTE), 99, dur(59, 0))),
		one(status(over, limit("per-user", 100, rlsv3.RateLimitResponse_RateLimit_MINUTE), 0, dur(1, 500000000))),
		one(status(ok, limit("", 0, rlsv3.RateLimitResponse_RateLimit_UNKNOWN), 0, dur(0, 0))),
		one(status(ok, &rlsv3.RateLimitResponse_RateLimit{}, 0, &durationpb.Duration{})),
		one(status(ok, limit("max", math.MaxUint32, rlsv3.RateLimitResponse_RateLimit_WEEK), math.MaxUint32, dur(604800, 0))),
		one(status(ok, limit("u", 1, 99), 1, dur(0, 1000))),
		one(status(ok, limit("u", 1, rlsv3.RateLimitResponse_RateLimit_YEAR), 1, dur(0, 1))),
		one(status(ok, limit("u", 1, rlsv3.RateLimitResponse_RateLimit_SECOND), 1, dur(0, 10))),
		one(status(ok, limit("u", 1, rlsv3.RateLimitResponse_RateLimit_SECOND), 1, dur(0, 120000))),
		one(status(ok, limit("u", 1, rlsv3.RateLimitResponse_RateLimit_SECOND), 1, dur(0, 999999999))),
		one(status(ok, nil, 1, dur(-1, -500000000))),
		one(status(ok, nil, 1, dur(0, -1))),
		one(status(ok, nil, 1, dur(-3, 0))),
		one(status(ok, nil, 1, dur(315576000000, 999999999))),
		one(status(ok, nil, 1, dur(-315576000000, -999999999))),
		one(status(ok, &rlsv3.RateLimitResponse_RateLimit{Name: "m", RequestsPerUnit: 10, Unit: rlsv3.RateLimitResponse_RateLimit_SECOND,
			UnitMultiplier: wrapperspb.UInt32(5)}, 3, dur(4, 0))),
		one(status(ok, &rlsv3.RateLimitResponse_RateLimit{UnitMultiplier: wrapperspb.UInt32(0)}, 0, nil)),
		{OverallCode: over, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{
			status(ok, limit("a", 10, rlsv3.RateLimitResponse_RateLimit_HOUR), 5, dur(3599, 0)),
			status(over, limit("b", 1, rlsv3.RateLimitResponse_RateLimit_DAY), 0, dur(86399, 0)),
			status(ok, nil, 0, nil),
		}, ResponseHeadersToAdd: headers("ratelimit", `"per-user";r=0;t=59`, "ratelimit-policy", `"per-user";q=100;w=60`, "retry-after", "59")},
		{ResponseHeadersToAdd: headers("", "", "k", "", "", "v")},
		{ResponseHeadersToAdd: []*corev3.HeaderValue{}},
	}
	for _, s := range envoyTexts {
		if !utf8.ValidString(s) {
			continue
		}
		encoded = append(encoded,
			&rlsv3.RateLimitResponse{ResponseHeadersToAdd: headers(s, s)},
			one(status(ok, limit(s, 1, rlsv3.RateLimitResponse_RateLimit_SECOND), 0, nil)))
	}
	refused := []*rlsv3.RateLimitResponse{
		nil,
		{RequestHeadersToAdd: headers("a", "b")},
		{RawBody: []byte("x")},
		{DynamicMetadata: &structpb.Struct{}},
		{Quota: &rlsv3.RateLimitResponse_Quota{}},
		{Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{nil}},
		{Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{Quota: &rlsv3.RateLimitResponse_Quota{}}}},
		{ResponseHeadersToAdd: []*corev3.HeaderValue{nil}},
		{ResponseHeadersToAdd: []*corev3.HeaderValue{{Key: "k", RawValue: []byte("v")}}},
		{OverallCode: ok, Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{status(ok, nil, 1, nil), nil}},
		one(status(ok, nil, 1, dur(315576000001, 0))),
		one(status(ok, nil, 1, dur(-315576000001, 0))),
		one(status(ok, nil, 1, dur(1, -1))),
		one(status(ok, nil, 1, dur(-1, 1))),
		one(status(ok, nil, 1, dur(0, 1000000000))),
		one(status(ok, nil, 1, dur(0, -1000000000))),
	}
	for _, s := range envoyTexts {
		if !utf8.ValidString(s) {
			refused = append(refused,
				&rlsv3.RateLimitResponse{ResponseHeadersToAdd: headers("k", s)},
				&rlsv3.RateLimitResponse{ResponseHeadersToAdd: headers(s, "v")},
				one(status(ok, limit(s, 1, rlsv3.RateLimitResponse_RateLimit_SECOND), 0, nil)))
		}
	}
	for _, r := range encoded {
		if !checkEnvoyEncoder(t, r) {
			t.Errorf("%v is left to protojson", r)
		}
	}
	for _, r := range refused {
		if checkEnvoyEncoder(t, r) {
			t.Errorf("%v is encoded, not left to protojson", r)
		}
	}
}

// TestAppendEnvoyResponseRandom checks the encoder on random responses of
// the fields it encodes.
func TestAppendEnvoyResponseRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	u32 := func() uint32 {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return math.MaxUint32
		case 2:
			return rng.Uint32N(1000)
		}
		return rng.Uint32()
	}
	text := func() string {
		if rng.IntN(3) == 0 {
			return envoyTexts[rng.IntN(len(envoyTexts))]
		}
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		if rng.IntN(2) == 0 {
			return strings.ToValidUTF8(string(b), "?")
		}
		return string(b)
	}
	duration := func() *durationpb.Duration {
		secs := []int64{0, 1, 59, 3600, 315576000000, rng.Int64N(1 << 40)}[rng.IntN(6)]
		nanos := []int32{0, 1, 1000, 1000000, 500000000, 999999999, rng.Int32N(1e9)}[rng.IntN(7)]
		if rng.IntN(4) == 0 {
			secs, nanos = -secs, -nanos
		}
		return &durationpb.Duration{Seconds: secs, Nanos: nanos}
	}
	encoded := 0
	for range 20000 {
		r := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_Code(rng.IntN(4))}
		for range rng.IntN(4) {
			st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_Code(rng.IntN(4)), LimitRemaining: u32()}
			if rng.IntN(4) > 0 {
				st.CurrentLimit = &rlsv3.RateLimitResponse_RateLimit{Name: text(), RequestsPerUnit: u32(),
					Unit: rlsv3.RateLimitResponse_RateLimit_Unit(rng.IntN(9))}
				if rng.IntN(5) == 0 {
					st.CurrentLimit.UnitMultiplier = wrapperspb.UInt32(u32())
				}
			}
			if rng.IntN(4) > 0 {
				st.DurationUntilReset = duration()
			}
			r.Statuses = append(r.Statuses, st)
		}
		for range rng.IntN(4) {
			r.ResponseHeadersToAdd = append(r.ResponseHeadersToAdd, &corev3.HeaderValue{Key: text(), Value: text()})
		}
		if checkEnvoyEncoder(t, r) {
			encoded++
		} else if _, err := protojson.Marshal(r); err == nil {
			t.Fatalf("%v is left to protojson, which encodes it", r)
		}
	}
	if encoded < 5000 {
		t.Errorf("only %d of the random responses are encoded", encoded)
	}
}

// TestAppendEnvoyResponseFields checks that the encoder knows every field
// of the messages it encodes: a field that go-control-plane adds must be
// encoded, or make the encoder report false, before this test passes.
func TestAppendEnvoyResponseFields(t *testing.T) {
	for _, c := range []struct {
		m      proto.Message
		fields []string
	}{
		{&rlsv3.RateLimitResponse{}, []string{"overall_code", "statuses", "response_headers_to_add",
			"request_headers_to_add", "raw_body", "dynamic_metadata", "quota"}},
		{&rlsv3.RateLimitResponse_DescriptorStatus{}, []string{"code", "current_limit", "limit_remaining", "duration_until_reset", "quota"}},
		{&rlsv3.RateLimitResponse_RateLimit{}, []string{"requests_per_unit", "unit", "name", "unit_multiplier"}},
		{&corev3.HeaderValue{}, []string{"key", "value", "raw_value"}},
	} {
		var have []string
		fds := c.m.ProtoReflect().Descriptor().Fields()
		for i := range fds.Len() {
			have = append(have, string(fds.Get(i).Name()))
		}
		slices.Sort(have)
		slices.Sort(c.fields)
		if !slices.Equal(have, c.fields) {
			t.Errorf("%s has the fields %v; AppendEnvoyResponse knows %v", c.m.ProtoReflect().Descriptor().FullName(), have, c.fields)
		}
	}
}
