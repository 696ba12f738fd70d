package grpccodec

import (
	"bytes"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	sluicev1 "github.com/sluicerate/sluice/proto/sluice/v1"
)

// textCodec is sluice serve's codec: lenient for the requests of its own
// service and Envoy's.
var textCodec = New(&sluicev1.DecideRequest{}, &sluicev1.ReserveRequest{}, &sluicev1.CancelRequest{}, &rlsv3.RateLimitRequest{})

// textRequests are requests of every type sluice serve's codec decodes
// leniently, with s in each of their string fields.
func textRequests(s string) []proto.Message {
	return []proto.Message{
		&sluicev1.DecideRequest{Policy: "api" + s, Attributes: map[string]string{"user" + s: "u" + s, "path": s, s: "x"}, Cost: proto.Int64(3)},
		&sluicev1.DecideRequest{Policy: s},
		&sluicev1.ReserveRequest{Schedule: "carrier" + s, Attributes: map[string]string{"carrier": s}, Cost: proto.Int64(0)},
		&sluicev1.CancelRequest{Schedule: s, Attributes: map[string]string{"carrier": "45"}, Id: "r-" + s},
		&rlsv3.RateLimitRequest{Domain: "api" + s, HitsAddend: 7, Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: s}, {Key: s, Value: "v"}},
				Limit:      &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 10, Unit: typev3.RateLimitUnit_HOUR, UnitMultiplier: wrapperspb.UInt32(3)},
				HitsAddend: wrapperspb.UInt64(0), IsNegativeHits: true},
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "path", Value: "/" + s}}},
			{},
		}},
	}
}

// notUTF8 stands for "ÿ" (C3 BF) in textRequests: the same length, not
// UTF-8. The messages encode no other C3 BF.
const notUTF8 = "\xff\xfe"

// wireNotUTF8 encodes m, written with "ÿ" in its strings, with notUTF8
// in their place.
func wireNotUTF8(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.ReplaceAll(b, []byte("ÿ"), []byte(notUTF8))
}

func TestGRPCCodec(t *testing.T) {
	c := New(&sluicev1.DecideRequest{}, &sluicev1.ReserveRequest{}, &sluicev1.CancelRequest{}, &rlsv3.RateLimitRequest{})
	valid, bad := textRequests("ÿ"), textRequests(notUTF8)
	for i, m := range valid {
		name := string(m.ProtoReflect().Descriptor().Name())
		t.Run(name+"/valid", func(t *testing.T) {
			b, err := proto.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			got := m.ProtoReflect().New().Interface()
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, got); err != nil || !proto.Equal(got, m) {
				t.Errorf("got %v, %v; want %v", got, err, m)
			}
			// The lenient decoding agrees with protobuf's, unknown fields
			// and a known field of the wrong wire type included.
			b = protowire.AppendVarint(protowire.AppendTag(b, 1, protowire.VarintType), 5)
			b = protowire.AppendFixed32(protowire.AppendTag(b, 99, protowire.Fixed32Type), 5)
			want := m.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(b, want); err != nil {
				t.Fatal(err)
			}
			got = m.ProtoReflect().New().Interface()
			if invalid, err := unmarshalText(b, got.ProtoReflect()); err != nil || invalid || !proto.Equal(got, want) {
				t.Errorf("lenient: %v, %v, %v; want %v", got, invalid, err, want)
			}
		})
		t.Run(name+"/not UTF-8", func(t *testing.T) {
			b := wireNotUTF8(t, m)
			if err := proto.Unmarshal(b, m.ProtoReflect().New().Interface()); err == nil {
				t.Fatal("protobuf decoded strings that are not UTF-8")
			}
			got := m.ProtoReflect().New().Interface()
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, got); err != nil || !proto.Equal(got, bad[i]) {
				t.Errorf("got %v, %v; want %v", got, err, bad[i])
			}
			// Malformed besides: refused as protobuf refuses it.
			for _, b := range [][]byte{b[:len(b)-1], append(b[:len(b):len(b)], 0x08), append(b[:len(b):len(b)], 0x07, 0)} {
				if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, got); err == nil {
					t.Errorf("malformed %x decoded: %v", b, got)
				}
			}
		})
	}

	// Other messages are decoded as grpc-go's codec decodes them.
	b := wireNotUTF8(t, &healthpb.HealthCheckRequest{Service: "ÿ"})
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &healthpb.HealthCheckRequest{}); err == nil {
		t.Error("a health check request that is not UTF-8 was decoded")
	}
	out, err := c.Marshal(&healthpb.HealthCheckRequest{Service: "svc"})
	if want, _ := proto.Marshal(&healthpb.HealthCheckRequest{Service: "svc"}); err != nil || !bytes.Equal(out.Materialize(), want) {
		t.Errorf("Marshal = %x, %v; want %x", out.Materialize(), err, want)
	}
}

// FuzzUnmarshalText checks that the lenient decoding of any bytes is
// protobuf's wherever protobuf decodes them, and decodes no more than
// protobuf would without checking UTF-8.
func FuzzUnmarshalText(f *testing.F) {
	for _, m := range textRequests("ÿ") {
		b, _ := proto.Marshal(m)
		f.Add(b)
		f.Add(wireNotUTF8(f, m))
	}
	// A tag whose field number is above protobuf's maximum (2^29 - 1).
	f.Add([]byte("\x95\xbf\x9e\xb800000"))
	types := []proto.Message{&sluicev1.DecideRequest{}, &sluicev1.ReserveRequest{}, &sluicev1.CancelRequest{}, &rlsv3.RateLimitRequest{}}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, typ := range types {
			want, got := typ.ProtoReflect().New().Interface(), typ.ProtoReflect().New().Interface()
			err := proto.Unmarshal(b, want)
			invalid, gerr := unmarshalText(b, got.ProtoReflect())
			switch {
			case err == nil && (gerr != nil || invalid || !proto.Equal(got, want)):
				t.Errorf("%T of %x: %v, %v, %v; want %v", typ, b, got, invalid, gerr, want)
			case err != nil && gerr == nil && !invalid:
				t.Errorf("%T of %x: protobuf refused it (%v), the lenient decoding did not", typ, b, err)
			case err != nil && gerr == nil && !strings.Contains(err.Error(), "invalid UTF-8"):
				t.Errorf("%T of %x: protobuf refused it for another reason than UTF-8 (%v)", typ, b, err)
			}
		}
	})
}

// BenchmarkGRPCCodec decodes a valid request with grpc-go's protobuf codec
// and with sluice serve's, and one that is not UTF-8 with sluice serve's.
func BenchmarkGRPCCodec(b *testing.B) {
	valid := textRequests("ü")
	reqs := []struct {
		name string
		m    proto.Message
	}{{"decide", valid[0]}, {"envoy", valid[4]}}
	codecs := []struct {
		name string
		c    encoding.CodecV2
	}{{"grpc-go", encoding.GetCodecV2(protoenc.Name)}, {"sluice", textCodec}}
	for _, r := range reqs {
		wire, err := proto.Marshal(r.m)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range codecs {
			b.Run(r.name+"/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				data := mem.BufferSlice{mem.SliceBuffer(wire)}
				for b.Loop() {
					if err := c.c.Unmarshal(data, r.m.ProtoReflect().New().Interface()); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	for i, m := range textRequests("ÿ") {
		if i != 0 && i != 4 {
			continue
		}
		data := mem.BufferSlice{mem.SliceBuffer(wireNotUTF8(b, m))}
		b.Run(string(m.ProtoReflect().Descriptor().Name())+"/sluice/not UTF-8", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := textCodec.Unmarshal(data, m.ProtoReflect().New().Interface()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
