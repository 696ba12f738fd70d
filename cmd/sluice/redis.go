package main

import (
	"errors"

	"github.com/sluicerate/sluice"
)

// openRedis opens a Redis store at url with the given key prefix.
func openRedis(url, prefix string) (sluice.Store, string, error) {
	return nil, "", errors.New("redis store not available yet")
}
