package envoy

import (
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// A descriptor's metadata is any mapping the user writes; with
// Options.DynamicMetadata (RESPONSE_DYNAMIC_METADATA) an answer's dynamic
// metadata carries the metadata of the descriptors that passed (package
// dynmeta).

// metadata reads a descriptor's metadata: a mapping of text keys to text,
// numbers, booleans, nulls, lists and mappings.
func (d *decoder) metadata(n *yaml.Node) *structpb.Struct {
	if n.Kind != yaml.MappingNode {
		d.Errorf(n, "metadata is not a mapping; write \"metadata: {name: value}\", any mapping Envoy is to receive")
		return nil
	}
	v, ok := d.metadataValue(n)
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

// metadataValue is the value of n, a node of a descriptor's metadata, as
// structpb takes it; false after reporting a key that is not text.
func (d *decoder) metadataValue(n *yaml.Node) (any, bool) {
	if n = d.Resolve(n); n == nil {
		return nil, false
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := d.Resolve(n.Content[i])
			if k == nil || k.Kind != yaml.ScalarNode {
				if k != nil {
					d.Errorf(k, "metadata has a key that is not text; write keys as text")
				}
				return nil, false
			}
			v, ok := d.metadataValue(n.Content[i+1])
			if !ok {
				return nil, false
			}
			m[k.Value] = v
		}
		return m, true
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, ok := d.metadataValue(c)
			if !ok {
				return nil, false
			}
			l = append(l, v)
		}
		return l, true
	}
	var v any
	switch n.Tag {
	case "!!bool", "!!int", "!!float", "!!null":
		if err := n.Decode(&v); err == nil {
			return v, true
		}
	}
	return n.Value, true // text, and anything else as written (a date, say)
}
