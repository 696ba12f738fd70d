package memstore

import (
	"strconv"
	"strings"
)

// encodeValues returns the values of the attributes named in by, encoded so
// that distinct value lists give distinct strings. One attribute is its value
// as is (no allocation); several are length-prefixed.
func encodeValues(by []string, attrs map[string]string) string {
	switch len(by) {
	case 0:
		return ""
	case 1:
		return attrs[by[0]]
	}
	var b strings.Builder
	for _, a := range by {
		v := attrs[a]
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	return b.String()
}
