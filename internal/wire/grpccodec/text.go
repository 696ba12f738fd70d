package grpccodec

import (
	"errors"
	"math"
	"slices"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// unmarshalText decodes the wire-format message b into the empty message m
// as proto.Unmarshal does, but keeps the bytes of a string field whether or
// not they are valid UTF-8 (a protoreflect string holds any bytes). It
// reports whether some string was not valid UTF-8. It decodes proto3
// messages only, whose enums are open and which have neither groups nor
// required fields, and leaves extensions unknown (proto3 declares none);
// a message of another syntax is an error.
func unmarshalText(b []byte, m protoreflect.Message) (invalid bool, err error) {
	d := textDecoder{}
	err = d.message(b, m, 0)
	return d.invalid, err
}

// maxTextDepth is how deep messages may nest, as proto.Unmarshal's default
// recursion limit.
const maxTextDepth = 10000

var (
	errTextDepth  = errors.New("grpccodec: message nested too deep")
	errTextSyntax = errors.New("grpccodec: lenient decoding of a message that is not proto3")
	errTextNumber = errors.New("grpccodec: field number out of range")
)

// textDecoder decodes as unmarshalText, noting whether a string was not
// valid UTF-8.
type textDecoder struct{ invalid bool }

// message merges the fields encoded in b into m.
func (d *textDecoder) message(b []byte, m protoreflect.Message, depth int) error {
	md := m.Descriptor()
	if md.Syntax() != protoreflect.Proto3 {
		return errTextSyntax
	}
	if depth > maxTextDepth {
		return errTextDepth
	}
	fields := md.Fields()
	for len(b) > 0 {
		num, typ, v, rest, err := consumeField(b)
		if err != nil {
			return err
		}
		b = rest
		known := false
		if fd := fields.ByNumber(num); fd != nil {
			if known, err = d.field(m, fd, typ, v, depth); err != nil {
				return err
			}
		}
		if !known {
			// As proto.Unmarshal keeps it: the tag encoded anew.
			m.SetUnknown(append(protowire.AppendTag(slices.Clip(m.GetUnknown()), num, typ), v...))
		}
	}
	return nil
}

// field merges v, the value of fd encoded with wire type typ, into m. It
// reports false when typ is not fd's wire type: the field is then unknown,
// as proto.Unmarshal treats it.
func (d *textDecoder) field(m protoreflect.Message, fd protoreflect.FieldDescriptor, typ protowire.Type, v []byte, depth int) (bool, error) {
	want := wireType(fd.Kind())
	var body []byte // a length-delimited value without its length
	if typ == protowire.BytesType {
		body, _ = protowire.ConsumeBytes(v)
	}
	switch {
	case fd.Kind() == protoreflect.GroupKind:
		return true, errTextSyntax
	case fd.IsMap():
		if typ != protowire.BytesType {
			return false, nil
		}
		return true, d.mapEntry(m.Mutable(fd).Map(), fd, body, depth)
	case fd.IsList() && typ == protowire.BytesType && want != protowire.BytesType:
		// A packed list of scalars.
		list := m.Mutable(fd).List()
		for len(body) > 0 {
			x, n := d.scalar(fd, want, body)
			if n < 0 {
				return true, protowire.ParseError(n)
			}
			list.Append(x)
			body = body[n:]
		}
		return true, nil
	case typ != want:
		return false, nil
	case fd.IsList() && fd.Kind() == protoreflect.MessageKind:
		list := m.Mutable(fd).List()
		e := list.NewElement()
		if err := d.message(body, e.Message(), depth+1); err != nil {
			return true, err
		}
		list.Append(e)
		return true, nil
	case fd.Kind() == protoreflect.MessageKind:
		// A message given twice is merged, as proto.Unmarshal does.
		return true, d.message(body, m.Mutable(fd).Message(), depth+1)
	}
	x, n := d.scalar(fd, want, v)
	if n < 0 {
		return true, protowire.ParseError(n)
	}
	if fd.IsList() {
		m.Mutable(fd).List().Append(x)
	} else {
		m.Set(fd, x)
	}
	return true, nil
}

// mapEntry decodes the map entry b of fd into mp: a missing key or value
// is its zero value, the last of a repeated one counts, and other fields
// are skipped, as proto.Unmarshal does.
func (d *textDecoder) mapEntry(mp protoreflect.Map, fd protoreflect.FieldDescriptor, b []byte, depth int) error {
	kd, vd := fd.MapKey(), fd.MapValue()
	key, val := kd.Default(), protoreflect.Value{}
	for len(b) > 0 {
		num, typ, v, rest, err := consumeField(b)
		if err != nil {
			return err
		}
		b = rest
		var ed protoreflect.FieldDescriptor
		switch num {
		case 1:
			ed = kd
		case 2:
			ed = vd
		}
		if ed == nil || typ != wireType(ed.Kind()) {
			continue
		}
		if ed.Kind() == protoreflect.MessageKind {
			if !val.IsValid() {
				val = mp.NewValue()
			}
			body, _ := protowire.ConsumeBytes(v)
			if err := d.message(body, val.Message(), depth+1); err != nil {
				return err
			}
			continue
		}
		x, xn := d.scalar(ed, typ, v)
		if xn < 0 {
			return protowire.ParseError(xn)
		}
		if num == 1 {
			key = x
		} else {
			val = x
		}
	}
	if !val.IsValid() {
		if vd.Kind() == protoreflect.MessageKind {
			val = mp.NewValue()
		} else {
			val = vd.Default()
		}
	}
	mp.Set(key.MapKey(), val)
	return nil
}

// scalar decodes the first value of fd's kind, of wire type typ, in b,
// and returns it and its length, negative when b is malformed.
func (d *textDecoder) scalar(fd protoreflect.FieldDescriptor, typ protowire.Type, b []byte) (protoreflect.Value, int) {
	switch typ {
	case protowire.VarintType:
		v, n := protowire.ConsumeVarint(b)
		switch fd.Kind() {
		case protoreflect.BoolKind:
			return protoreflect.ValueOfBool(protowire.DecodeBool(v)), n
		case protoreflect.EnumKind:
			return protoreflect.ValueOfEnum(protoreflect.EnumNumber(int32(v))), n
		case protoreflect.Int32Kind:
			return protoreflect.ValueOfInt32(int32(v)), n
		case protoreflect.Sint32Kind:
			return protoreflect.ValueOfInt32(int32(protowire.DecodeZigZag(v & math.MaxUint32))), n
		case protoreflect.Uint32Kind:
			return protoreflect.ValueOfUint32(uint32(v)), n
		case protoreflect.Int64Kind:
			return protoreflect.ValueOfInt64(int64(v)), n
		case protoreflect.Sint64Kind:
			return protoreflect.ValueOfInt64(protowire.DecodeZigZag(v)), n
		default: // Uint64Kind
			return protoreflect.ValueOfUint64(v), n
		}
	case protowire.Fixed32Type:
		v, n := protowire.ConsumeFixed32(b)
		switch fd.Kind() {
		case protoreflect.Sfixed32Kind:
			return protoreflect.ValueOfInt32(int32(v)), n
		case protoreflect.FloatKind:
			return protoreflect.ValueOfFloat32(math.Float32frombits(v)), n
		default: // Fixed32Kind
			return protoreflect.ValueOfUint32(v), n
		}
	case protowire.Fixed64Type:
		v, n := protowire.ConsumeFixed64(b)
		switch fd.Kind() {
		case protoreflect.Sfixed64Kind:
			return protoreflect.ValueOfInt64(int64(v)), n
		case protoreflect.DoubleKind:
			return protoreflect.ValueOfFloat64(math.Float64frombits(v)), n
		default: // Fixed64Kind
			return protoreflect.ValueOfUint64(v), n
		}
	}
	v, n := protowire.ConsumeBytes(b)
	if fd.Kind() == protoreflect.StringKind {
		if !utf8.Valid(v) {
			d.invalid = true
		}
		return protoreflect.ValueOfString(string(v)), n
	}
	return protoreflect.ValueOfBytes(append([]byte{}, v...)), n
}

// consumeField splits the field at the start of b into its number, wire
// type and encoded value, and returns the rest of b.
func consumeField(b []byte) (num protowire.Number, typ protowire.Type, v, rest []byte, err error) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return 0, 0, nil, nil, protowire.ParseError(n)
	}
	if num > protowire.MaxValidNumber {
		return 0, 0, nil, nil, errTextNumber
	}
	vn := protowire.ConsumeFieldValue(num, typ, b[n:])
	if vn < 0 {
		return 0, 0, nil, nil, protowire.ParseError(vn)
	}
	return num, typ, b[n : n+vn], b[n+vn:], nil
}

// wireType is the wire type of a value of kind k (a list's, unpacked).
func wireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.Sfixed32Kind, protoreflect.Fixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Sfixed64Kind, protoreflect.Fixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind:
		return protowire.BytesType
	}
	return protowire.VarintType
}
