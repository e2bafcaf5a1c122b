// The glue of scripts/peers.sh: generates the objects, runs interlock, gator
// and kyverno over them one at a time, measures each run (wall time from the
// start to the exit, user+sys CPU and peak RSS from the child's rusage, the
// load average at the start), reads each tool's findings, checks that they
// are the same object names per rule, and prints the table with the ratios.
//
//	go run . gen -n 1000 -o DIR
//	go run . bench -interlock BIN -gator BIN -kyverno BIN -policies DIR -work DIR -sizes 1000,10000
//
// Standard library only, so that it builds offline in a second.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fatalf("usage: peers gen|bench [flags]")
	}
	switch os.Args[1] {
	case "gen":
		fs := flag.NewFlagSet("gen", flag.ExitOnError)
		n := fs.Int("n", 1000, "objects")
		out := fs.String("o", "", "output directory")
		_ = fs.Parse(os.Args[2:])
		if *out == "" {
			fatalf("gen: -o is required")
		}
		g, err := generate(*n, filepath.Join(*out, "objects"), filepath.Join(*out, "kyverno-context.yaml"))
		if err != nil {
			fatalf("gen: %v", err)
		}
		fmt.Printf("%d objects, %d files, %d bytes\n", g.objects, g.files, g.bytes)
	case "bench":
		bench(os.Args[2:])
	default:
		fatalf("unknown command %q (gen, bench)", os.Args[1])
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "peers: "+format+"\n", args...)
	os.Exit(2)
}

// ---------------------------------------------------------------------------
// The objects
// ---------------------------------------------------------------------------

type generated struct {
	objects, files int
	bytes          int64
}

// Per application: a Deployment, three Pods of it and an Ingress. Ten
// applications per namespace, one YAML file per namespace. Violations are
// sown at fixed rates so every rule has findings: a latest tag 1 app in 97,
// a container without a memory limit 1 in 89, a pod spec without
// runAsNonRoot 1 in 83, a privileged container 1 in 79 (each on the
// Deployment's template and so on its Pods), and an Ingress host that
// another Ingress already claims 1 in 97 Ingresses (in another namespace
// or its own, with the same path: a conflict for both rules).
const (
	appsPerNamespace = 10
	podsPerApp       = 3
	objectsPerApp    = 2 + podsPerApp
)

// generate writes the objects into dir and, when ctxPath is not empty, a
// Kyverno CLI Context (cli.kyverno.io/v1alpha1) holding the same Ingresses and
// their Namespaces, for `kyverno apply --context-file`: the only way its
// offline `resource.List` sees other objects.
func generate(n int, dir, ctxPath string) (generated, error) {
	var g generated
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return g, err
	}
	var ctx bytes.Buffer
	ctx.WriteString("apiVersion: cli.kyverno.io/v1alpha1\nkind: Context\nmetadata:\n  name: peers\nspec:\n  resources:\n")
	toCtx := func(obj string) {
		ctx.WriteString("    - " + strings.TrimPrefix(indent(obj, "      "), "      "))
	}
	apps := (n + objectsPerApp - 1) / objectsPerApp
	var hosts []string
	var buf bytes.Buffer
	flush := func(ns int) error {
		if buf.Len() == 0 {
			return nil
		}
		p := filepath.Join(dir, fmt.Sprintf("ns-%05d.yaml", ns))
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			return err
		}
		g.files++
		g.bytes += int64(buf.Len())
		buf.Reset()
		return nil
	}
	left := n
	for a := 0; a < apps && left > 0; a++ {
		ns := a / appsPerNamespace
		nsName := fmt.Sprintf("team-%05d", ns)
		if a%appsPerNamespace == 0 {
			if err := flush(ns - 1); err != nil {
				return g, err
			}
			toCtx("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + nsName + "\n")
		}
		name := fmt.Sprintf("app-%06d", a)
		image := fmt.Sprintf("registry.example.com/team-%d/%s:1.%d.%d", ns%37, name, a%13, a%7)
		if a%97 == 5 {
			image = fmt.Sprintf("registry.example.com/team-%d/%s:latest", ns%37, name)
		}
		memLimit := a%89 != 7
		nonRoot := a%83 != 11
		privileged := a%79 == 13
		spec := podSpec(name, image, memLimit, nonRoot, privileged)
		emit := func(s string) {
			if left > 0 {
				buf.WriteString("---\n")
				buf.WriteString(s)
				g.objects++
				left--
			}
		}
		emit(deployment(nsName, name, spec))
		for p := 0; p < podsPerApp; p++ {
			emit(pod(nsName, fmt.Sprintf("%s-7d9f8c%04x-%c%c%c%c%c", name, a%65536, 'a'+rune(p), 'b'+rune(a%20), 'c'+rune(p), 'x', 'z'-rune(a%10)), name, spec))
		}
		host := fmt.Sprintf("%s.%s.apps.example.com", name, nsName)
		if a%97 == 50 && len(hosts) > 0 {
			// A host of an application in another namespace.
			host = hosts[(a*7)%len(hosts)]
		} else {
			hosts = append(hosts, host)
		}
		if left > 0 {
			toCtx(ingress(nsName, name, host))
		}
		emit(ingress(nsName, name, host))
	}
	if err := flush(apps / appsPerNamespace); err != nil {
		return g, err
	}
	if ctxPath != "" {
		if err := os.WriteFile(ctxPath, ctx.Bytes(), 0o644); err != nil {
			return g, err
		}
	}
	return g, nil
}

func podSpec(app, image string, memLimit, nonRoot, privileged bool) string {
	var b strings.Builder
	b.WriteString("serviceAccountName: " + app + "\n")
	b.WriteString("securityContext:\n  runAsUser: 10001\n  fsGroup: 10001\n")
	if nonRoot {
		b.WriteString("  runAsNonRoot: true\n")
	}
	b.WriteString("  seccompProfile:\n    type: RuntimeDefault\n")
	b.WriteString("containers:\n")
	b.WriteString("  - name: app\n    image: " + image + "\n")
	b.WriteString("    args: [\"--config=/etc/app/config.yaml\", \"--log-format=json\"]\n")
	b.WriteString("    ports:\n      - name: http\n        containerPort: 8080\n        protocol: TCP\n")
	b.WriteString("    env:\n      - name: APP_NAME\n        value: " + app + "\n      - name: DATABASE_URL\n        valueFrom:\n          secretKeyRef:\n            name: " + app + "-db\n            key: url\n")
	b.WriteString("    resources:\n      requests:\n        cpu: 100m\n        memory: 128Mi\n")
	if memLimit {
		b.WriteString("      limits:\n        memory: 256Mi\n")
	}
	b.WriteString("    readinessProbe:\n      httpGet:\n        path: /ready\n        port: http\n      periodSeconds: 10\n")
	b.WriteString("    securityContext:\n      allowPrivilegeEscalation: false\n      readOnlyRootFilesystem: true\n")
	if privileged {
		b.WriteString("      privileged: true\n")
	}
	b.WriteString("    volumeMounts:\n      - name: config\n        mountPath: /etc/app\n")
	b.WriteString("  - name: log-shipper\n    image: registry.example.com/platform/log-shipper:2.4.1\n")
	b.WriteString("    resources:\n      requests:\n        cpu: 10m\n        memory: 32Mi\n      limits:\n        memory: 64Mi\n")
	b.WriteString("    securityContext:\n      allowPrivilegeEscalation: false\n")
	b.WriteString("volumes:\n  - name: config\n    configMap:\n      name: " + app + "-config\n")
	return b.String()
}

func indent(s, pad string) string {
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l != "" {
			b.WriteString(pad + l)
		}
	}
	return b.String()
}

func labels(app, pad string) string {
	return pad + "app.kubernetes.io/name: " + app + "\n" + pad + "app.kubernetes.io/part-of: shop\n" + pad + "team: payments\n"
}

func deployment(ns, app, spec string) string {
	return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + app + "\n  namespace: " + ns + "\n  labels:\n" + labels(app, "    ") +
		"spec:\n  replicas: 3\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: " + app + "\n  template:\n    metadata:\n      labels:\n" +
		labels(app, "        ") + "    spec:\n" + indent(spec, "      ")
}

func pod(ns, name, app, spec string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  namespace: " + ns + "\n  labels:\n" + labels(app, "    ") +
		"spec:\n" + indent(spec, "  ")
}

func ingress(ns, app, host string) string {
	return "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: " + app + "\n  namespace: " + ns + "\n  labels:\n" + labels(app, "    ") +
		"spec:\n  ingressClassName: nginx\n  rules:\n    - host: " + host + "\n      http:\n        paths:\n          - path: /\n            pathType: Prefix\n            backend:\n              service:\n                name: " + app +
		"\n                port:\n                  name: http\n"
}

// ---------------------------------------------------------------------------
// Measuring
// ---------------------------------------------------------------------------

type measure struct {
	wall, cpu time.Duration
	rssKiB    int64
	load      string
	killed    bool // stopped at the timeout
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return f[0]
}

// run starts argv under nice -n 19 with stdout to outPath, waits, and
// returns its measure. Exit codes in okCodes are findings, not failures.
func run(argv []string, outPath string, timeout time.Duration, okCodes ...int) (measure, error) {
	var m measure
	out, err := os.Create(outPath)
	if err != nil {
		return m, err
	}
	defer out.Close()
	var stderr bytes.Buffer
	cmd := exec.Command("nice", append([]string{"-n", "19"}, argv...)...)
	cmd.Stdout = out
	cmd.Stderr = &stderr
	m.load = loadavg()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return m, fmt.Errorf("%s: %v", argv[0], err)
	}
	var timer *time.Timer
	if timeout > 0 {
		// nice execs the tool, so the pid is the tool's.
		timer = time.AfterFunc(timeout, func() { _ = cmd.Process.Kill() })
	}
	err = cmd.Wait()
	m.wall = time.Since(start)
	if timer != nil && !timer.Stop() {
		m.killed = true
	}
	if cmd.ProcessState == nil {
		return m, fmt.Errorf("%s: %v", argv[0], err)
	}
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if ru != nil {
		m.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		m.rssKiB = ru.Maxrss
	}
	if m.killed {
		return m, nil
	}
	code := cmd.ProcessState.ExitCode()
	for _, c := range append([]int{0}, okCodes...) {
		if code == c {
			return m, nil
		}
	}
	tail := stderr.String()
	if len(tail) > 2000 {
		tail = tail[len(tail)-2000:]
	}
	return m, fmt.Errorf("%s exited %d: %s", filepath.Base(argv[0]), code, tail)
}

// ---------------------------------------------------------------------------
// Findings: rule -> set of "namespace/Kind/name"
// ---------------------------------------------------------------------------

type findings map[string]map[string]bool

// errorsKey holds, in a findings map, the objects a tool reported an
// evaluation error for (kyverno's "error" results), by rule.
const errorsKey = "\x00errors:"

func (f findings) add(rule, ns, kind, name string) {
	if f[rule] == nil {
		f[rule] = map[string]bool{}
	}
	f[rule][ns+"/"+kind+"/"+name] = true
}

func interlockFindings(path string) (findings, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r struct {
		Results []struct {
			Policy string `json:"policy"`
			Object struct {
				Kind, Namespace, Name string
			} `json:"object"`
		} `json:"results"`
		Errors []json.RawMessage `json:"errors"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("interlock -o json: %v", err)
	}
	if len(r.Errors) > 0 {
		return nil, fmt.Errorf("interlock reported %d errors, the first: %s", len(r.Errors), r.Errors[0])
	}
	f := findings{}
	for _, x := range r.Results {
		f.add(x.Policy, x.Object.Namespace, x.Object.Kind, x.Object.Name)
	}
	return f, nil
}

func gatorFindings(path string) (findings, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f := findings{}
	if len(bytes.TrimSpace(b)) == 0 || bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return f, nil
	}
	var rs []struct {
		Constraint struct {
			Metadata struct{ Name string } `json:"metadata"`
		} `json:"constraint"`
		ViolatingObject struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name, Namespace string
			} `json:"metadata"`
		} `json:"violatingObject"`
		EnforcementAction string `json:"enforcementAction"`
	}
	if err := json.Unmarshal(b, &rs); err != nil {
		return nil, fmt.Errorf("gator -o json: %v", err)
	}
	for _, x := range rs {
		f.add(x.Constraint.Metadata.Name, x.ViolatingObject.Metadata.Namespace, x.ViolatingObject.Kind, x.ViolatingObject.Metadata.Name)
	}
	return f, nil
}

// kyvernoFindings reads the PolicyReport(s) `kyverno apply --policy-report
// --output-format json` prints, after whatever text comes first.
func kyvernoFindings(path string) (findings, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	i := bytes.IndexByte(b, '{')
	if i < 0 {
		return nil, fmt.Errorf("kyverno printed no JSON report: %.300s", b)
	}
	f := findings{}
	dec := json.NewDecoder(bytes.NewReader(b[i:]))
	for {
		var v any
		if err := dec.Decode(&v); err != nil {
			if errors.Is(err, os.ErrClosed) || err.Error() == "EOF" {
				break
			}
			break
		}
		walkKyverno(v, f)
	}
	return f, nil
}

func walkKyverno(v any, f findings) {
	switch t := v.(type) {
	case map[string]any:
		if results, ok := t["results"].([]any); ok {
			for _, r := range results {
				rm, _ := r.(map[string]any)
				if rm == nil || (rm["result"] != "fail" && rm["result"] != "error") {
					continue
				}
				policy, _ := rm["policy"].(string)
				if rm["result"] == "error" {
					policy = errorsKey + policy
				}
				res, _ := rm["resources"].([]any)
				for _, o := range res {
					om, _ := o.(map[string]any)
					ns, _ := om["namespace"].(string)
					kind, _ := om["kind"].(string)
					name, _ := om["name"].(string)
					f.add(policy, ns, kind, name)
				}
			}
		}
		for k, x := range t {
			if k != "results" {
				walkKyverno(x, f)
			}
		}
	case []any:
		for _, x := range t {
			walkKyverno(x, f)
		}
	}
}

// ---------------------------------------------------------------------------
// The bench
// ---------------------------------------------------------------------------

var rules = []string{"disallow-latest", "require-memory-limits", "run-as-non-root", "no-privileged", "unique-ingress-host"}

type tool struct {
	name    string
	argv    func(objects string) []string
	parse   func(string) (findings, error)
	rules   []string // the rules this tool runs
	skipped string   // why it does not run at a size, when it does not
	// seconds per object at the largest size run, to predict the next
	perObject float64
}

type result struct {
	runs     []measure
	med      measure
	findings findings
	err      error
	skipped  string
}

func median(ms []measure) measure {
	if len(ms) == 0 {
		return measure{}
	}
	s := append([]measure(nil), ms...)
	sort.Slice(s, func(i, j int) bool { return s[i].wall < s[j].wall })
	m := s[len(s)/2]
	cpus := make([]time.Duration, len(ms))
	rss := make([]int64, len(ms))
	for i, x := range ms {
		cpus[i], rss[i] = x.cpu, x.rssKiB
	}
	sort.Slice(cpus, func(i, j int) bool { return cpus[i] < cpus[j] })
	sort.Slice(rss, func(i, j int) bool { return rss[i] < rss[j] })
	m.cpu, m.rssKiB = cpus[len(cpus)/2], rss[len(rss)/2]
	loads := make([]string, len(ms))
	for i, x := range ms {
		loads[i] = x.load
	}
	m.load = strings.Join(loads, "/")
	return m
}

func bench(args []string) {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	interlock := fs.String("interlock", "", "interlock binary")
	gator := fs.String("gator", "", "gator binary")
	kyverno := fs.String("kyverno", "", "kyverno binary")
	policies := fs.String("policies", "", "hack/peers/policies")
	uniqueHost := fs.String("unique-host", "", "Interlock's unique-ingress-host policy")
	work := fs.String("work", "", "work directory")
	sizesFlag := fs.String("sizes", "1000,10000,100000", "sizes")
	repeat := fs.Int("repeat", 0, "runs per tool and size (0: 3 while a run takes under 20 s, else 1)")
	kyvernoLimit := fs.Float64("kyverno-limit", 600, "skip kyverno where its predicted time passes this many seconds")
	timeouts := map[string]*time.Duration{
		"interlock": fs.Duration("interlock-timeout", 0, "stop an interlock run after this long (0: never)"),
		"gator":     fs.Duration("gator-timeout", 0, "stop a gator run after this long (0: never)"),
		"kyverno":   fs.Duration("kyverno-timeout", 0, "stop a kyverno run after this long (0: never)"),
	}
	only := fs.String("tools", "interlock,gator,kyverno", "the tools to run; the others are listed as not run")
	gatorLimit := fs.Float64("gator-limit", 0, "skip gator where its predicted time passes this many seconds (0: never)")
	_ = fs.Parse(args)
	if *interlock == "" || *gator == "" || *kyverno == "" || *policies == "" || *work == "" || *uniqueHost == "" {
		fatalf("bench: -interlock, -gator, -kyverno, -policies, -unique-host and -work are required")
	}
	var sizes []int
	for _, s := range strings.Split(*sizesFlag, ",") {
		n, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(s), "_", ""))
		if err != nil || n <= 0 {
			fatalf("bench: bad size %q", s)
		}
		sizes = append(sizes, n)
	}
	vap := filepath.Join(*policies, "vap", "policies.yaml")
	gk := filepath.Join(*policies, "gatekeeper")
	kyvernoUnique := filepath.Join(*policies, "kyverno", "unique-ingress-host.yaml")
	tools := []*tool{
		{name: "interlock", rules: rules, parse: interlockFindings, argv: func(o string) []string {
			return []string{*interlock, "check", "-o", "json", "-p", vap, "-p", *uniqueHost, o}
		}},
		{name: "gator", rules: rules, parse: gatorFindings, argv: func(o string) []string {
			return []string{*gator, "test", "-o", "json", "-f", gk, "-f", o}
		}},
		{name: "kyverno", rules: rules, parse: kyvernoFindings, argv: func(o string) []string {
			return []string{*kyverno, "apply", vap, kyvernoUnique, "--resource", o, "--context-file", strings.TrimSuffix(o, "/") + ".kyverno-context.yaml",
				"--policy-report", "--output-format", "json", "--remove-color"}
		}},
	}
	fmt.Println("rules: 4 ValidatingAdmissionPolicies over Deployments and Pods (hack/peers/policies/vap), the same")
	fmt.Println("  expressions as K8sNativeValidation templates for gator (hack/peers/policies/gatekeeper), and")
	fmt.Println("  unique-ingress-host: Interlock's bundled policy; gator: Gatekeeper's k8suniqueingresshost (Rego, data.inventory).")
	fmt.Println("  kyverno: a ValidatingPolicy (hack/peers/policies/kyverno) whose resource.List reads a Context file")
	fmt.Println("  holding the same Ingresses and their Namespaces (kyverno apply never lets a policy see the --resource")
	fmt.Println("  manifests); the context is written with the objects and is not timed apart.")
	fmt.Printf("machine: %d CPUs; every tool runs under nice -n 19, one at a time; the load average is read from /proc/loadavg\n  at each run's start. Wall time on a loaded machine is mostly waiting for a core: compare CPU.\n", numCPU())
	status := 0
	for _, n := range sizes {
		dir := filepath.Join(*work, fmt.Sprintf("objects-%d", n))
		ctxPath := dir + ".kyverno-context.yaml"
		_ = os.RemoveAll(dir)
		g, err := generate(n, dir, ctxPath)
		if err != nil {
			fatalf("generate %d: %v", n, err)
		}
		fmt.Printf("\n== %d objects (Deployments, Pods, Ingresses), %d files, %.1f MiB of YAML\n", g.objects, g.files, float64(g.bytes)/(1<<20))
		res := map[string]*result{}
		for _, t := range tools {
			r := &result{}
			res[t.name] = r
			if !contains(strings.Split(*only, ","), t.name) {
				r.skipped = "not run in this invocation (-tools " + *only + ")"
				continue
			}
			limit := map[string]float64{"kyverno": *kyvernoLimit, "gator": *gatorLimit}[t.name]
			if limit > 0 && t.perObject > 0 {
				if predicted := t.perObject * float64(n); predicted > limit {
					r.skipped = fmt.Sprintf("not run: %.0f s predicted (linearly) from the last size, over the %.0f s limit", predicted, limit)
					continue
				}
			}
			runs := *repeat
			for i := 0; runs == 0 || i < runs; i++ {
				out := filepath.Join(*work, fmt.Sprintf("%s-%d.out", t.name, n))
				m, err := run(t.argv(dir), out, *timeouts[t.name], 1)
				if err != nil {
					r.err = err
					break
				}
				if m.killed {
					r.skipped = fmt.Sprintf("not finished: stopped after %.0f s wall (%.1f s CPU, %.1f MiB peak RSS by then; load %s)",
						m.wall.Seconds(), m.cpu.Seconds(), float64(m.rssKiB)/1024, m.load)
					break
				}
				r.runs = append(r.runs, m)
				if i == 0 {
					r.findings, r.err = t.parse(out)
					if r.err != nil {
						break
					}
					if runs == 0 {
						runs = 3
						if m.wall > 20*time.Second {
							runs = 1
						}
					}
				}
			}
			r.med = median(r.runs)
			if r.skipped != "" {
				continue
			}
			if len(r.runs) > 0 {
				t.perObject = r.med.wall.Seconds() / float64(n)
			}
		}
		// The table.
		base := res["interlock"]
		fmt.Printf("%-10s %5s %10s %10s %10s %9s %9s %9s  %s\n", "tool", "runs", "wall", "CPU", "peak RSS", "wall/IL", "CPU/IL", "RSS/IL", "load average at each run's start")
		for _, t := range tools {
			r := res[t.name]
			switch {
			case r.skipped != "":
				fmt.Printf("%-10s %s\n", t.name, r.skipped)
				continue
			case r.err != nil:
				fmt.Printf("%-10s FAILED: %v\n", t.name, r.err)
				status = 1
				continue
			}
			ratio := func(a, b float64) string {
				if base.err != nil || b == 0 {
					return "-"
				}
				return fmt.Sprintf("%.1fx", a/b)
			}
			m := r.med
			fmt.Printf("%-10s %5d %9.3fs %9.3fs %7.1fMiB %9s %9s %9s  %s\n", t.name, len(r.runs), m.wall.Seconds(), m.cpu.Seconds(), float64(m.rssKiB)/1024,
				ratio(m.wall.Seconds(), base.med.wall.Seconds()), ratio(m.cpu.Seconds(), base.med.cpu.Seconds()),
				ratio(float64(m.rssKiB), float64(base.med.rssKiB)), m.load)
		}
		// The findings, rule by rule.
		fmt.Println("findings (objects per rule; compared by namespace/kind/name):")
		for _, rule := range rules {
			var parts []string
			var ref map[string]bool
			refName := ""
			same := true
			for _, t := range tools {
				r := res[t.name]
				if r.err != nil || r.skipped != "" || !contains(t.rules, rule) {
					continue
				}
				got := r.findings[rule]
				parts = append(parts, fmt.Sprintf("%s %d", t.name, len(got)))
				if ref == nil {
					ref, refName = got, t.name
					if ref == nil {
						ref = map[string]bool{}
					}
					continue
				}
				if d := diff(ref, got); d != "" {
					same = false
					fmt.Printf("  %s: %s and %s differ: %s\n", rule, refName, t.name, d)
				}
			}
			verdict := "identical"
			if !same {
				verdict = "DIFFERENT"
				status = 1
			}
			if len(parts) < 2 {
				verdict = "nothing to compare"
			}
			fmt.Printf("  %-22s %-45s %s\n", rule, strings.Join(parts, ", "), verdict)
		}
		for _, t := range tools {
			if r := res[t.name]; r.err == nil && r.skipped == "" {
				for rule := range r.findings {
					if after, ok := strings.CutPrefix(rule, errorsKey); ok {
						kinds := map[string]int{}
						for o := range r.findings[rule] {
							kinds[strings.Split(o, "/")[1]]++
						}
						fmt.Printf("  %s: %s reported %d evaluation errors (not findings), by kind %v\n", t.name, after, len(r.findings[rule]), kinds)
						continue
					}
					if !contains(rules, rule) {
						fmt.Printf("  %s reported an unexpected rule %q (%d objects)\n", t.name, rule, len(r.findings[rule]))
						status = 1
					}
				}
			}
		}
	}
	os.Exit(status)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func diff(a, b map[string]bool) string {
	var onlyA, onlyB []string
	for k := range a {
		if !b[k] {
			onlyA = append(onlyA, k)
		}
	}
	for k := range b {
		if !a[k] {
			onlyB = append(onlyB, k)
		}
	}
	if len(onlyA) == 0 && len(onlyB) == 0 {
		return ""
	}
	sort.Strings(onlyA)
	sort.Strings(onlyB)
	cut := func(xs []string) string {
		if len(xs) > 3 {
			return strings.Join(xs[:3], " ") + fmt.Sprintf(" (+%d)", len(xs)-3)
		}
		return strings.Join(xs, " ")
	}
	return fmt.Sprintf("only in the first: %d [%s]; only in the second: %d [%s]", len(onlyA), cut(onlyA), len(onlyB), cut(onlyB))
}

func numCPU() int {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	s := bufio.NewScanner(f)
	for s.Scan() {
		if strings.HasPrefix(s.Text(), "processor") {
			n++
		}
	}
	return n
}
