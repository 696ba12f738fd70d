package main

import (
	"bytes"
	"context"
	"testing"
)

// TestPlay checks the worked example of docs/leases.md on the memory store:
// the fifth request waits for a slot, each answer's usage replaces its
// estimate, and an answer that ran long is counted in full.
func TestPlay(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run(context.Background(), nil, &out, &errs); code != 0 {
		t.Fatalf("run = %d: %s", code, errs.String())
	}
	const want = `request 1  admitted  estimate   6000  tokens   6000  in flight 1
request 2  admitted  estimate   6000  tokens  12000  in flight 2
request 3  admitted  estimate   6000  tokens  18000  in flight 3
request 4  admitted  estimate   6000  tokens  24000  in flight 4
request 5  denied by in-flight (concurrency), retry after 2m0s
request 1  settled   usage      1840  tokens  19840  in flight 3
request 5  admitted  estimate   6000  tokens  25840  in flight 4
request 2  settled   usage      9000  tokens  28840  in flight 3
request 3  settled   usage      2500  tokens  25340  in flight 2
request 4  settled   usage      3100  tokens  22440  in flight 1
request 5  settled   usage       700  tokens  17140  in flight 0
`
	if got := out.String(); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

func TestBadFlag(t *testing.T) {
	var out, errs bytes.Buffer
	if code := run(context.Background(), []string{"-nope"}, &out, &errs); code != 2 {
		t.Errorf("run -nope = %d, want 2", code)
	}
}
