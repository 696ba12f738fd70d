// Package grpccodec is the codec of sluice serve's gRPC server: protobuf,
// with a hand decoder, held to proto.Unmarshal by a differential fuzz test,
// for the requests whose string fields are not valid UTF-8, so that their
// handlers can name the field instead of grpc-go failing the call.
package grpccodec

import (
	"google.golang.org/grpc/encoding"
	protoenc "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Codec is the codec of sluice serve's gRPC server: grpc-go's protobuf
// codec, except for requests whose string fields are not valid UTF-8.
//
// protobuf refuses a proto3 string field that is not UTF-8 while decoding,
// and grpc-go fails a call whose request its codec cannot decode with
// codes.Internal, before any handler runs. For the request types in text
// (those whose handlers check every string field themselves), Codec
// then decodes the request again keeping the bytes as sent, so the handler
// answers codes.InvalidArgument naming the field or attribute. A bad byte
// is never replaced (U+FFFD would make "\xff" and "\xfe" one user).
//
// A request that protobuf decodes is decoded by grpc-go's codec alone: the
// second decoding runs only after it failed. Every other message type, and
// a request that is malformed for another reason, fails as with grpc-go's
// codec. A Codec is safe for concurrent use.
type Codec struct {
	proto encoding.CodecV2
	text  map[protoreflect.FullName]bool
}

// New returns the codec for a server whose handlers check the
// strings of the request types in text.
func New(text ...proto.Message) *Codec {
	c := &Codec{proto: encoding.GetCodecV2(protoenc.Name), text: make(map[protoreflect.FullName]bool, len(text))}
	for _, m := range text {
		c.text[m.ProtoReflect().Descriptor().FullName()] = true
	}
	return c
}

// Name is grpc-go's protobuf codec's.
func (c *Codec) Name() string { return c.proto.Name() }

// Marshal is grpc-go's protobuf codec's.
func (c *Codec) Marshal(v any) (mem.BufferSlice, error) { return c.proto.Marshal(v) }

// Unmarshal decodes data into v as grpc-go's protobuf codec does. When that
// fails, v is one of the request types whose handlers check their strings,
// and data is a well-formed message but for string fields that are not
// valid UTF-8, v gets those fields' bytes as sent.
func (c *Codec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.proto.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	m, ok := v.(proto.Message)
	if !ok || !c.text[m.ProtoReflect().Descriptor().FullName()] {
		return err
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	proto.Reset(m)
	if invalid, lerr := unmarshalText(buf.ReadOnlyData(), m.ProtoReflect()); lerr != nil || !invalid {
		proto.Reset(m)
		return err
	}
	return nil
}
