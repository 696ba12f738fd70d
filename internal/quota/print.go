package quota

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// Format is how sluice credits and usage print an answer.
type Format uint8

const (
	Text Format = iota // for a person
	JSON               // one line of JSON, as the server answers
	CSV                // usage only: a billing export (Usage.WriteCSV)
)

// Write writes u to w in format f.
func (u *Usage) Write(w io.Writer, f Format) error {
	switch f {
	case JSON:
		return json.NewEncoder(w).Encode(u)
	case CSV:
		return u.WriteCSV(w)
	}
	return u.WriteText(w)
}

// Write writes b, the answer to req, to w in format f (CSV is Text).
func (b Balance) Write(w io.Writer, req *CreditRequest, f Format) error {
	if f == JSON {
		return json.NewEncoder(w).Encode(b)
	}
	_, err := fmt.Fprintln(w, b.Text(req))
	return err
}

// TimeFlag is a flag.Value of a time in RFC 3339; unset, the zero time.
type TimeFlag struct{ T time.Time }

func (t *TimeFlag) String() string {
	if t.T.IsZero() {
		return ""
	}
	return t.T.Format(time.RFC3339Nano)
}

func (t *TimeFlag) Set(s string) error {
	v, err := parseAt(s)
	if err != nil {
		return fmt.Errorf("%q: %w", s, err)
	}
	t.T = v
	return nil
}

// parseAt returns the time s writes as RFC 3339: the time whose period a
// usage query takes as the current one, from 1970 on.
func parseAt(s string) (time.Time, error) {
	v, err := time.Parse(time.RFC3339Nano, s)
	switch {
	case err != nil:
		return time.Time{}, errors.New("write a time as RFC 3339, such as 2027-01-01T00:00:00+01:00")
	case v.Before(time.Unix(0, 0)):
		return time.Time{}, errors.New("the time is before 1970; give a later one, such as 2027-01-01T00:00:00+01:00")
	}
	return v, nil
}
