// Package yamlfile is the YAML plumbing of sluice's two configuration
// formats, its own file (package config) and envoyproxy/ratelimit's
// (package envoy): a file's one document, aliases followed within a node
// budget, problems with their file, line and column, the one reader of
// durations, the size limit and the walk of a directory of files.
//
// Each format keeps its schema and its wording; what they share is here
// once, so that both report alike and neither can be fed a file the other
// would refuse as too large or too deep.
package yamlfile

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Error is one problem found in a configuration file, with where it is.
type Error struct {
	// File is the file's name as given to the format's Load or Parse.
	File string

	// Line and Column locate the problem, 1-based; 0 when unknown.
	Line, Column int

	// Msg says what is wrong and how to fix it.
	Msg string
}

// Error returns "file:line:column: message".
func (e *Error) Error() string {
	switch {
	case e.Line > 0 && e.Column > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// errorf returns the problem at n in the file named file, or of the whole
// file when n is nil.
func errorf(file string, n *yaml.Node, format string, args ...any) *Error {
	e := &Error{File: file, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	return e
}

// ErrorList is every problem found in a configuration file, in file order.
// The formats' Load and Parse return one when a file is invalid.
type ErrorList []*Error

// Error returns one problem per line.
func (l ErrorList) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap returns the problems, so errors.As finds an *Error.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// Suggest returns `did you mean "x"?` when one of valid is close to got,
// or the list of valid names otherwise: for messages about unknown names.
func Suggest(got string, valid []string) string {
	if best, ok := Closest(got, valid); ok {
		return fmt.Sprintf("did you mean %q?", best)
	}
	return "valid: " + strings.Join(valid, ", ")
}

// Closest returns the one of valid closest to got, case aside, and whether
// it is within two edits: a mistyped name's intended one.
func Closest(got string, valid []string) (string, bool) {
	best, bestDist := "", 3
	for _, v := range valid {
		if d := editDistance(strings.ToLower(got), v); d < bestDist {
			best, bestDist = v, d
		}
	}
	return best, best != ""
}

// editDistance is the Levenshtein distance between a and b, bytewise.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return max(len(a), len(b))
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
