package goredis_test

import (
	"testing"

	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/redisstore/goredis"
)

// The store over go-redis runs the conformance suite and the script tests
// with package redisstore's tests, next to the store over rueidis.

func TestNewNilClient(t *testing.T) {
	if _, err := goredis.New(nil, redisstore.Config{}); err == nil {
		t.Error("New(nil): no error")
	}
}
