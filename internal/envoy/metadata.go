package envoy

import (
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// A descriptor's metadata is any mapping the user writes; with
// decide.Options.DynamicMetadata (RESPONSE_DYNAMIC_METADATA) an answer's
// dynamic metadata carries the metadata of the descriptors that passed
// (package dynmeta).

// metadata reads a descriptor's metadata: a mapping of text keys to text,
// numbers, booleans, nulls, lists and mappings.
func (d *decoder) metadata(n *yaml.Node) *structpb.Struct {
	if n.Kind != yaml.MappingNode {
		d.Errorf(n, "metadata is not a mapping; write \"metadata: {name: value}\", any mapping Envoy is to receive")
		return nil
	}
	v, ok := d.Value(n, "metadata")
	if !ok {
		return nil
	}
	s, err := structpb.NewStruct(v.(map[string]any))
	if err != nil {
		d.Errorf(n, "metadata: %v; use text, numbers, booleans, lists and mappings with text keys", err)
		return nil
	}
	return s
}
