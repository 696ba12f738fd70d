package yamlfile

import (
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// MaxFileSize is the largest configuration file either format reads.
const MaxFileSize = 4 << 20

// Source is one named YAML document: a file's name and contents, or a
// resource's name and body from elsewhere (a control plane).
type Source struct {
	Name string
	Data []byte
}

// CheckSize returns the ErrorList of a file named name of n bytes when n is
// over MaxFileSize, else nil.
func CheckSize(name string, n int64) error {
	if n > MaxFileSize {
		return ErrorList{errorf(name, nil, "the file is %d bytes; a configuration file is at most %d", n, MaxFileSize)}
	}
	return nil
}

// ReadFile reads the file at path, at most MaxFileSize bytes: a larger file
// is an ErrorList, a file that cannot be read the os package's error.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := CheckSize(path, st.Size()); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	return data, CheckSize(path, int64(len(data))) // it grew since Stat
}

// Files returns the paths of the *.yaml and *.yml files in dir and its
// subdirectories, sorted. Names starting with '.' are skipped, files and
// directories alike: editors' swap files, and the timestamped directories
// of a Kubernetes config map, whose files are read through the links
// beside them.
func Files(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if path != dir && strings.HasPrefix(name, ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() && (strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	slices.Sort(files)
	return files, nil
}

// ReadDir reads the files Files lists, each with ReadFile.
func ReadDir(dir string) ([]Source, error) {
	files, err := Files(dir)
	if err != nil {
		return nil, err
	}
	srcs := make([]Source, 0, len(files))
	for _, f := range files {
		b, err := ReadFile(f)
		if err != nil {
			return nil, err
		}
		srcs = append(srcs, Source{Name: f, Data: b})
	}
	return srcs, nil
}

// Sum is a SHA-256 over the names and contents of the files Files lists in
// dir, or nil when one cannot be read (while an editor replaces it, say):
// what a watcher compares to tell that ReadDir would read something else.
func Sum(dir string) []byte {
	files, err := Files(dir)
	if err != nil {
		return nil
	}
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil
		}
		h.Write([]byte(f))
		h.Write([]byte{0})
		sum := sha256.Sum256(b)
		h.Write(sum[:])
	}
	return h.Sum(nil)
}
