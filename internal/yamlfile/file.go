package yamlfile

import (
	"bytes"
	"errors"
	"io"

	"go.yaml.in/yaml/v3"
)

// MaxNodes bounds the YAML nodes a file may expand to, aliases followed:
// nested aliases (each naming the one before twice) cannot make loading a
// small file explode.
const MaxNodes = 200_000

// File is one file being decoded: its name, the problems found in it so
// far, and the nodes visited, counted against MaxNodes. A format's decoder
// embeds one. Its zero value, with a Name, is ready to use.
type File struct {
	// Name is the file's name, as problems report it.
	Name string

	// Errs are the problems found, in the order they were found.
	Errs ErrorList

	nodes int
}

// Errorf records a problem at n, or of the whole file when n is nil.
func (f *File) Errorf(n *yaml.Node, format string, args ...any) {
	f.Errs = append(f.Errs, errorf(f.Name, n, format, args...))
}

// Resolve follows aliases from n and counts the node it lands on against
// MaxNodes. It returns nil when n is nil or the file is over the budget,
// reporting the budget once, at the node that passes it.
func (f *File) Resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil || f.nodes > MaxNodes {
		return nil
	}
	if f.nodes++; f.nodes > MaxNodes {
		f.Errorf(n, "the file expands to more than %d YAML nodes (nested aliases?); write it out plainly", MaxNodes)
		return nil
	}
	return n
}

// Document returns the root of data's one YAML document, or nil after
// recording why there is none: a syntax error at its line and column, no document
// (reported with empty, which says what the format's file holds), or a
// second document (reported at it with second, which says where the
// format wants it instead).
func (f *File) Document(data []byte, empty, second string) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc, extra yaml.Node
	switch err := dec.Decode(&doc); {
	case errors.Is(err, io.EOF) || err == nil && len(doc.Content) == 0:
		f.Errorf(nil, "%s", empty)
	case err == nil:
		if err = dec.Decode(&extra); errors.Is(err, io.EOF) {
			return doc.Content[0]
		} else if err == nil {
			f.Errorf(&extra, "%s", second)
			return nil
		}
		fallthrough
	default:
		line, column, problem := syntaxAt(data, err)
		f.Errorf(&yaml.Node{Line: line, Column: column}, "YAML syntax: %s", problem)
	}
	return nil
}
