package config

import "github.com/sluicerate/sluice/internal/yamlfile"

// Error is one problem found in a configuration file, with where it is;
// ErrorList is every problem found, in file order, which Load and Parse
// return for an invalid file. They are package yamlfile's, so that both
// kinds of file report alike.
type (
	Error     = yamlfile.Error
	ErrorList = yamlfile.ErrorList
)
