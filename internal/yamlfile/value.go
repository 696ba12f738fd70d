package yamlfile

import "go.yaml.in/yaml/v3"

// Value returns n, aliases followed, as plain Go values: mappings with text
// keys as map[string]any, sequences as []any, booleans, numbers and nulls
// as YAML reads them, anything else as its text (a date, say). It reports
// a key that is not text and returns false. what names the value in that
// message ("metadata").
func (f *File) Value(n *yaml.Node, what string) (any, bool) {
	if n = f.Resolve(n); n == nil {
		return nil, false
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := f.Resolve(n.Content[i])
			if k == nil || k.Kind != yaml.ScalarNode {
				if k != nil {
					f.Errorf(k, "%s has a key that is not text; write keys as text", what)
				}
				return nil, false
			}
			v, ok := f.Value(n.Content[i+1], what)
			if !ok {
				return nil, false
			}
			m[k.Value] = v
		}
		return m, true
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, ok := f.Value(c, what)
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
	return n.Value, true
}
