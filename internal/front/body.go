package front

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"

	"github.com/sluicerate/sluice/httplimit"
)

// ReadBody reads r's body, at most max bytes, appending it to buf; a
// longer body is a 413 problem, one that cannot be read a 400.
func ReadBody(w http.ResponseWriter, r *http.Request, max int64, buf []byte) ([]byte, *httplimit.Problem) {
	buf, err := ReadCapped(w, r, max, buf)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return buf, &httplimit.Problem{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
				Detail: fmt.Sprintf("the request body is larger than %d bytes", tooBig.Limit)}
		}
		return buf, BadRequest("malformed_json", "reading the request body: %v", err)
	}
	return buf, nil
}

// ReadCapped appends r's body to buf, as io.ReadAll reads it, but for its
// first max bytes: a longer body fails with an *http.MaxBytesError. Room
// for a body of a declared length that fits is made at once.
func ReadCapped(w http.ResponseWriter, r *http.Request, max int64, buf []byte) ([]byte, error) {
	if n := r.ContentLength; n > 0 && n <= max {
		buf = slices.Grow(buf, int(n)+1) // +1: the read that finds the end
	}
	body := http.MaxBytesReader(w, r.Body, max)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// WriteJSON writes v as a 200 JSON response.
func WriteJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		Internal().Write(w)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(body, '\n'))
}
