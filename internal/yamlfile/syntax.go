package yamlfile

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"strconv"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// syntaxRE splits the YAML library's syntax errors into the line, when
// there is one, and the problem.
var syntaxRE = regexp.MustCompile(`(?s)^(?:yaml: (?:line (\d+): )?)?(.*)$`)

// maxSyntaxColumn bounds the runes of a line searched for a syntax error's
// column: each step parses the file up to it again.
const maxSyntaxColumn = 512

// syntaxProblem returns the problem of the first syntax error in data's
// documents, without its line, and whether there is one.
func syntaxProblem(data []byte) (string, bool) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		switch {
		case errors.Is(err, io.EOF):
			return "", false
		case err != nil:
			return syntaxRE.FindStringSubmatch(err.Error())[2], true
		}
	}
}

// syntaxAt returns where data's syntax error err is: the line and column at
// which a prefix of data first fails with err's problem. The YAML library
// reports the line where the enclosing block began, and no column. The
// column is 0 when it is not found; the line is the library's when no
// prefix fails alike.
func syntaxAt(data []byte, err error) (line, column int, problem string) {
	m := syntaxRE.FindStringSubmatch(err.Error())
	line, _ = strconv.Atoi(m[1])
	problem = m[2]
	fails := func(end int) bool {
		p, failed := syntaxProblem(data[:end])
		return failed && p == problem
	}
	var ends []int // the offset after each line
	for i, b := range data {
		if b == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(data) {
		ends = append(ends, len(data))
	}
	lo, hi := 0, len(ends)-1
	for lo < hi { // the first line whose end fails, once one fails all do
		if mid := (lo + hi) / 2; fails(ends[mid]) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if !fails(ends[lo]) {
		return line, 0, problem
	}
	start := 0
	if lo > 0 {
		start = ends[lo-1]
	}
	for o, col := start, 1; o < ends[lo] && col <= maxSyntaxColumn; col++ {
		_, size := utf8.DecodeRune(data[o:])
		if o += size; fails(o) {
			return lo + 1, col, problem
		}
	}
	return lo + 1, 0, problem
}
