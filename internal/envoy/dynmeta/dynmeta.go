// Package dynmeta builds the dynamic metadata envoyproxy/ratelimit sends
// with RESPONSE_DYNAMIC_METADATA=true: the request (domain, descriptors,
// hitsAddend) and the metadata of the descriptors that passed, merged.
// Envoy's rate-limit filter puts it under its own namespace
// (envoy.filters.http.ratelimit), where a route reads it: to send a request
// to the service that still has quota, say.
package dynmeta

import (
	"fmt"
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// Build is the dynamic metadata of an answer to req: the
// domain, each descriptor (its entries as "key=value", its own limit and
// hits_addend when it has them), the request's hits_addend when not 0, and
// the metadata of the descriptors in passed, merged in request order (the
// first to set a key keeps it; mappings under one key merge).
func Build(req *rlsv3.RateLimitRequest, passed []*structpb.Struct) *structpb.Struct {
	descs := make([]*structpb.Value, 0, len(req.GetDescriptors()))
	for _, d := range req.GetDescriptors() {
		if d != nil {
			descs = append(descs, structpb.NewStructValue(descriptorStruct(d)))
		}
	}
	fields := map[string]*structpb.Value{
		"domain":      structpb.NewStringValue(req.GetDomain()),
		"descriptors": structpb.NewListValue(&structpb.ListValue{Values: descs}),
	}
	if h := req.GetHitsAddend(); h != 0 {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(h))
	}
	merged := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for _, m := range passed {
		mergeStruct(merged, m)
	}
	if len(merged.Fields) > 0 {
		fields["metadata"] = structpb.NewStructValue(merged)
	}
	return &structpb.Struct{Fields: fields}
}

// descriptorStruct is one descriptor of a request as dynamic metadata
// reports it.
func descriptorStruct(d *ratelimitv3.RateLimitDescriptor) *structpb.Struct {
	entries := make([]*structpb.Value, 0, len(d.GetEntries()))
	for _, e := range d.GetEntries() {
		entries = append(entries, structpb.NewStringValue(e.GetKey()+"="+e.GetValue()))
	}
	fields := map[string]*structpb.Value{"entries": structpb.NewListValue(&structpb.ListValue{Values: entries})}
	if l := d.GetLimit(); l != nil {
		// envoyproxy/ratelimit reports the limit in protobuf's text format.
		fields["limit"] = structpb.NewStringValue(strings.TrimSpace(fmt.Sprint(l)))
	}
	if h := d.GetHitsAddend(); h != nil {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(h.GetValue()))
	}
	return &structpb.Struct{Fields: fields}
}

// mergeStruct merges src into dst: a key dst lacks is added; a key both
// hold as mappings is merged the same way; any other key dst holds stays.
// Values are copied, so the configuration's metadata is never changed.
func mergeStruct(dst, src *structpb.Struct) {
	for k, v := range src.GetFields() {
		old, ok := dst.Fields[k]
		switch {
		case !ok:
			dst.Fields[k] = cloneValue(v)
		case old.GetStructValue() != nil && v.GetStructValue() != nil:
			mergeStruct(old.GetStructValue(), v.GetStructValue())
		}
	}
}

// cloneValue copies v deeply enough that merging into the copy leaves v
// unchanged: its mappings are copied, the rest shared.
func cloneValue(v *structpb.Value) *structpb.Value {
	s := v.GetStructValue()
	if s == nil {
		return v
	}
	c := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(s.Fields))}
	for k, fv := range s.Fields {
		c.Fields[k] = cloneValue(fv)
	}
	return structpb.NewStructValue(c)
}
