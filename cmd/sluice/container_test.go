package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluicerate/sluice/internal/redistest"
)

// The container: the README's docker run commands start sluice serve as
// deploy/Dockerfile's entrypoint does. No container runtime is needed:
// TestContainerEntrypoint runs the built binary with the entrypoint's
// arguments, read from the Dockerfile, followed by those after the image's
// name in each README command, with the command's environment (-e), its
// mounted files (-v) at their paths in the container, and each published
// container port (-p) on a free port of the same interface.

// dockerEntrypoint returns the exec-form ENTRYPOINT of the Dockerfile.
func dockerEntrypoint(t *testing.T, dockerfile string) []string {
	t.Helper()
	data, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.ReplaceAll(string(data), "\\\n", " ")
	m := regexp.MustCompile(`(?m)^ENTRYPOINT\s+(\[.*\])\s*$`).FindStringSubmatch(joined)
	if m == nil {
		t.Fatalf("%s has no exec-form ENTRYPOINT [...]", dockerfile)
	}
	var args []string
	if err := json.Unmarshal([]byte(m[1]), &args); err != nil || len(args) < 2 {
		t.Fatalf("%s: ENTRYPOINT %s: %v", dockerfile, m[1], err)
	}
	return args
}

// shellWords splits a command line as a shell would, for what docker run
// lines use: quotes, a backslash-newline continuation, and $PWD.
func shellWords(line, pwd string) []string {
	line = strings.ReplaceAll(line, "\\\n", " ")
	var words []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '"' || c == '\''):
			quote, in = c, true
		case quote == 0 && (c == ' ' || c == '\t'):
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case quote != '\'' && strings.HasPrefix(line[i:], "$PWD"):
			cur.WriteString(pwd)
			i += len("$PWD") - 1
			in = true
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// containerRun is a docker run line: what the container is given.
type containerRun struct {
	line    int
	env     []string          // NAME=VALUE
	mounts  map[string]string // path in the container: path on the host
	publish map[string]bool   // container ports published
	args    []string          // after the image's name
}

// parseDockerRun parses a docker run command; hostEnv gives the value of
// an -e NAME that names a variable of the host's.
func parseDockerRun(t *testing.T, words []string, image string, hostEnv map[string]string) containerRun {
	t.Helper()
	r := containerRun{mounts: map[string]string{}, publish: map[string]bool{}}
	for i := 2; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "-") {
			if w != image {
				t.Fatalf("docker run %q: image %q, want %q", words, w, image)
			}
			r.args = words[i+1:]
			return r
		}
		if i+1 >= len(words) {
			t.Fatalf("docker run %q: %s has no value", words, w)
		}
		v := words[i+1]
		i++
		switch w {
		case "-e", "--env":
			if !strings.Contains(v, "=") {
				val, ok := hostEnv[v]
				if !ok {
					t.Fatalf("docker run -e %s: the page does not export %s", v, v)
				}
				v += "=" + val
			}
			r.env = append(r.env, v)
		case "-v", "--volume":
			parts := strings.Split(v, ":")
			if len(parts) < 2 {
				t.Fatalf("docker run -v %q: want HOST:CONTAINER[:ro]", v)
			}
			r.mounts[parts[1]] = parts[0]
		case "-p", "--publish":
			parts := strings.Split(v, ":")
			r.publish[parts[len(parts)-1]] = true
		default:
			t.Fatalf("docker run %q: the test does not know the option %s; teach it", words, w)
		}
	}
	t.Fatalf("docker run %q names no image", words)
	return r
}

// TestContainerEntrypoint runs deploy/Dockerfile's entrypoint with each of
// the README's docker run commands: sluice serve starts and answers on the
// published HTTP port, and the admin view is on loopback without a token,
// or, where the command publishes it, on every interface behind the token
// the command sets.
func TestContainerEntrypoint(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	entry := dockerEntrypoint(t, filepath.Join(root, "deploy", "Dockerfile"))
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, errs := parseDoc("README.md", readme)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	const token = "container-test-token"
	var runs []containerRun
	for _, b := range blocks {
		hostEnv := map[string]string{}
		for _, c := range b.commands() {
			words := shellWords(c.text, root)
			if len(words) >= 2 && words[0] == "export" {
				name, _, _ := strings.Cut(words[1], "=")
				hostEnv[name] = token // what the page's command would generate
			}
			if len(words) >= 2 && words[0] == "docker" && words[1] == "run" {
				r := parseDockerRun(t, words, "sluice", hostEnv)
				r.line = c.line
				runs = append(runs, r)
			}
		}
	}
	if len(runs) < 2 {
		t.Fatalf("README.md has %d docker run commands, want the plain one and the one that publishes the admin view", len(runs))
	}

	addrFlags := map[string]bool{"--http": true, "--grpc": true, "--admin": true}
	for _, r := range runs {
		t.Run(fmt.Sprintf("README.md:%d", r.line), func(t *testing.T) {
			t.Parallel()
			args := append(append([]string{}, entry[1:]...), r.args...)
			local := map[string]string{} // flag: the loopback address that reaches it
			last := map[string]int{}     // flag: its last index, the value flag parsing keeps
			for i, a := range args {
				last[a] = i
			}
			for i := 0; i+1 < len(args); i++ {
				if host, ok := r.mounts[args[i+1]]; ok {
					args[i+1] = host
				}
				if !addrFlags[args[i]] {
					continue
				}
				host, port, ok := strings.Cut(args[i+1], ":")
				if !ok {
					t.Fatalf("%s %s: not HOST:PORT", args[i], args[i+1])
				}
				if last[args[i]] != i {
					args[i+1] = freeAddr(t) // overridden by the later one
					continue
				}
				if (host == "127.0.0.1" || host == "localhost") && r.publish[port] {
					t.Errorf("README.md:%d publishes port %s, which the container serves on its loopback only (%s %s)", r.line, port, args[i], args[i+1])
				}
				free := freeAddr(t)
				_, freePort, _ := strings.Cut(free, ":")
				args[i+1] = host + ":" + freePort // the same interface
				local[args[i]] = free
			}
			if _, ok := local["--admin"]; !ok {
				t.Fatalf("the entrypoint %q has no --admin; the test checks where the admin view is", entry)
			}
			p := startProc(t, sluiceBinary(t), args, r.env)
			http := "http://" + local["--http"]
			if res := request(t, "GET", http+"/readyz", ""); res.Status != 200 {
				t.Errorf("GET /readyz = %d %s", res.Status, res.Body)
			}
			if res := request(t, "POST", http+"/v1/decide", `{"policy":"notify","attributes":{"category":"errors"}}`); res.Status != 200 ||
				!strings.Contains(string(res.Body), `"allowed":true`) {
				t.Errorf("POST /v1/decide = %d %s, want allowed", res.Status, res.Body)
			}
			admin := "http://" + local["--admin"]
			if !r.publish["9464"] {
				if a := p.adminAddr(); !strings.HasPrefix(a, "127.0.0.1:") {
					t.Errorf("the admin view serves %s, want the container's loopback", a)
				}
				if res := request(t, "GET", admin+"/api/v1/config", ""); res.Status != 200 {
					t.Errorf("admin GET /api/v1/config on loopback = %d, want 200 without a token", res.Status)
				}
				return
			}
			if a := p.adminAddr(); strings.HasPrefix(a, "127.") {
				t.Errorf("README.md:%d publishes 9464, but the admin view serves %s, which the host cannot reach", r.line, a)
			}
			if res := request(t, "GET", admin+"/api/v1/config", ""); res.Status != 401 {
				t.Errorf("admin GET /api/v1/config without the token = %d, want 401", res.Status)
			}
			if res := request(t, "GET", admin+"/api/v1/config", "", "Authorization", "Bearer "+token); res.Status != 200 {
				t.Errorf("admin GET /api/v1/config with the token = %d %s, want 200", res.Status, res.Body)
			}
		})
	}
}

// TestKubernetesDeployment runs the image's entrypoint as
// deploy/kubernetes's Deployment does: its args after the entrypoint's, the
// Secret's token as SLUICE_ADMIN_TOKEN, the ConfigMap's sluice.yaml as the
// file (its Redis address replaced by a redis-server the test starts), and
// checks what the probes, Prometheus and an operator ask of it.
func TestKubernetesDeployment(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "deploy", "kubernetes")
	type probe struct {
		HTTPGet struct{ Path string } `yaml:"httpGet"`
	}
	var manifest struct {
		Data       map[string]string `yaml:"data"`
		StringData map[string]string `yaml:"stringData"`
		Spec       struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Args []string `yaml:"args"`
						Env  []struct {
							Name string `yaml:"name"`
						} `yaml:"env"`
						ReadinessProbe probe `yaml:"readinessProbe"`
						LivenessProbe  probe `yaml:"livenessProbe"`
					} `yaml:"containers"`
				} `yaml:"spec"`
				Metadata struct {
					Annotations map[string]string `yaml:"annotations"`
				} `yaml:"metadata"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	read := func(name string) {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &manifest); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	read("configmap.yaml")
	config := manifest.Data["sluice.yaml"]
	read("secret.yaml")
	token := manifest.StringData["token"]
	read("deployment.yaml")
	if len(manifest.Spec.Template.Spec.Containers) != 1 || config == "" || token == "" {
		t.Fatalf("want one container, a ConfigMap with sluice.yaml and a Secret with a token; got %+v", manifest)
	}
	c := manifest.Spec.Template.Spec.Containers[0]
	if !strings.Contains(config, `"redis:6379"`) {
		t.Fatalf("the ConfigMap's sluice.yaml no longer names redis:6379; update the test:\n%s", config)
	}
	config = strings.Replace(config, `"redis:6379"`, `"`+redistest.Start(t).Addr()+`"`, 1)
	file := writeFile(t, t.TempDir(), "sluice.yaml", config)

	entry := dockerEntrypoint(t, filepath.Join(root, "deploy", "Dockerfile"))
	args := append(append([]string{}, entry[1:]...), c.Args...)
	local := map[string]string{}
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--config":
			args[i+1] = file
		case "--http", "--grpc", "--admin":
			host, _, _ := strings.Cut(args[i+1], ":")
			free := freeAddr(t)
			_, port, _ := strings.Cut(free, ":")
			args[i+1] = host + ":" + port
			local[args[i]] = free
		}
	}
	p := startProc(t, sluiceBinary(t), args, []string{"SLUICE_ADMIN_TOKEN=" + token})
	base := "http://" + local["--http"]
	for _, path := range []string{c.ReadinessProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Path, manifest.Spec.Template.Metadata.Annotations["prometheus.io/path"]} {
		if res := request(t, "GET", base+path, ""); res.Status != 200 {
			t.Errorf("GET %s = %d %s, want 200", path, res.Status, res.Body)
		}
	}
	if rec := p.waitLog("sluice serving", 0); !strings.Contains(fmt.Sprint(rec["store"]), "Redis") {
		t.Errorf("serving on store %v, want the ConfigMap's Redis", rec["store"])
	}
	fa := request(t, "GET", base+"/v1/forward-auth?policy=api", "", "X-Api-Key", "k1")
	if fa.Status != 200 || fa.Header.Get("RateLimit") == "" {
		t.Errorf("forward-auth with the ConfigMap's policy = %d %s, want 200 with RateLimit", fa.Status, fa.Body)
	}
	admin := "http://" + local["--admin"] + "/api/v1/config"
	if res := request(t, "GET", admin, ""); res.Status != 401 {
		t.Errorf("the admin view without the token = %d, want 401", res.Status)
	}
	if res := request(t, "GET", admin, "", "Authorization", "Bearer "+token); res.Status != 200 {
		t.Errorf("the admin view with the Secret's token = %d, want 200", res.Status)
	}
}
