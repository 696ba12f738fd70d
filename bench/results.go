package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// keepResults makes what the bench prints on stdout go also to a new file
// in dir, named by the run's date and time (now, in UTC) and its sections:
// results/2026-11-29-1042-service.md. It returns the file's path and a
// function that flushes and closes it, to call before the bench exits.
// The tables are written as they are printed, so a run stopped halfway
// keeps what it measured.
func keepResults(dir, sections string, now time.Time) (string, func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	name := "bench"
	if sections != defaultSections {
		name = strings.NewReplacer(",", "-", " ", "").Replace(sections)
	}
	path := filepath.Join(dir, now.UTC().Format("2006-01-02-1504")+"-"+name+".md")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", nil, fmt.Errorf("keeping the results: %w (another run this minute? pass -results '' or another folder)", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		f.Close()
		return "", nil, err
	}
	stdout := os.Stdout
	os.Stdout = w
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(io.MultiWriter(stdout, f), r)
	}()
	return path, func() {
		os.Stdout = stdout
		w.Close()
		<-copied
		r.Close()
		f.Close()
	}, nil
}
