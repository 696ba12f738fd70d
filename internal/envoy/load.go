package envoy

import (
	"errors"
	"fmt"
	"os"

	"github.com/sluicerate/sluice/internal/yamlfile"
)

// Error is one problem found in a configuration file, with where it is;
// ErrorList is every problem found, in file order. They are package
// yamlfile's, so that both kinds of file report alike.
type (
	Error     = yamlfile.Error
	ErrorList = yamlfile.ErrorList
)

// Source is one configuration document: a file's name and contents, or a
// resource's name and body from a control plane.
type Source = yamlfile.Source

// Load reads every *.yaml and *.yml file in dir and its subdirectories
// (names starting with '.' are skipped), in lexical order, and validates
// them together (Parse). Every problem found is reported in the returned
// ErrorList with its file, line and column.
func Load(dir string, opts LoadOptions) (*Config, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("envoy: %w; give the directory of envoyproxy/ratelimit configuration files", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("envoy: %s is not a directory; give the directory that holds the *.yaml files (RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config)", dir)
	}
	srcs, err := yamlfile.ReadDir(dir)
	var list ErrorList
	switch {
	case errors.As(err, &list):
		return nil, list
	case err != nil:
		return nil, fmt.Errorf("envoy: %w", err)
	}
	c, err := Parse(srcs, opts)
	if err != nil {
		return nil, err
	}
	c.Dir = dir
	return c, nil
}

// Parse validates a set of named configuration documents together, as
// Load does the files of a directory: wherever they come from, files or a
// control plane's resources, one loader reads them.
func Parse(docs []Source, opts LoadOptions) (*Config, error) {
	c := &Config{domains: map[string]*node{}, calendar: opts.CalendarUnits}
	var errs ErrorList
	for _, doc := range docs {
		d := &decoder{File: yamlfile.File{Name: doc.Name}, cfg: c, opts: opts}
		if err := yamlfile.CheckSize(doc.Name, int64(len(doc.Data))); err != nil {
			errs = append(errs, err.(ErrorList)...)
			continue
		}
		d.decode(doc.Data)
		errs = append(errs, d.Errs...)
		c.Files = append(c.Files, doc.Name)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}
