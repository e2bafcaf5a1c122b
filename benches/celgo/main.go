// cel-go, the CEL engine in kube-apiserver, on the expressions of
// benches/cel.rs over the same Pods (benches/data), for the side-by-side
// table of scripts/cel-vs-celgo.sh.
//
//	go run . -cases ../cel.rs -data ../data [-samples 31] [-batch-ms 5]
//
// The expressions are read from the CASES table of benches/cel.rs, so both
// benches always time the same text. cel-go is the version kube-apiserver
// 1.36 builds with (go.mod). The environment and program options are
// kube-apiserver's own that come from cel-go (k8s.io/apiserver
// pkg/cel/environment, base options up to 1.36, and the admission plugin's
// InterruptCheckFrequency): optional types, strings v2, sets, homogeneous
// literals, cross-type numeric comparisons, the literal validators; programs
// with OptOptimize, cost tracking and the per-call cost limit. The libraries
// kube-apiserver adds on top (quantity, URLs, IP, CIDR, lists, regex
// helpers) are not cel-go's, and none of the expressions calls them.
//
// Timed, per expression:
//   - compile: source to program (Compile + Program), as a policy load does;
//   - eval: one evaluation as admission runs it: an activation holding the
//     object (the decoded map[string]any, which cel-go adapts lazily, as
//     kube-apiserver passes an unstructured object), Eval.
//
// Each figure is the median of -samples batches of about -batch-ms each,
// the method of `cargo bench --bench cel -- --report`.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// kube-apiserver's per-call cost limit and interrupt check frequency
// (k8s.io/apiserver pkg/apis/cel).
const (
	perCallLimit   = 1000000
	checkFrequency = 100
)

type tcase struct {
	name, pod, expr string
}

// Case { name: "...", pod: Pod::Large, expr: "..." } in benches/cel.rs.
var caseRe = regexp.MustCompile(`(?s)Case\s*\{\s*name:\s*"([^"]+)",\s*pod:\s*Pod::(\w+),\s*expr:\s*"((?:[^"\\]|\\.)*)",\s*\}`)

func readCases(path string) ([]tcase, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cs []tcase
	for _, m := range caseRe.FindAllStringSubmatch(string(b), -1) {
		expr := strings.NewReplacer(`\\`, `\`, `\"`, `"`).Replace(m[3])
		cs = append(cs, tcase{name: m[1], pod: strings.ToLower(m[2]), expr: expr})
	}
	if len(cs) == 0 {
		return nil, fmt.Errorf("no Case { name, pod, expr } found in %s", path)
	}
	return cs, nil
}

func kubeEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("object", cel.DynType),
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		cel.CostEstimatorOptions(checker.PresenceTestHasCost(false)),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		cel.ASTValidators(
			cel.ValidateDurationLiterals(),
			cel.ValidateTimestampLiterals(),
			cel.ValidateRegexLiterals(),
			cel.ValidateHomogeneousAggregateLiterals(),
		),
		ext.Strings(ext.StringsVersion(2)),
		ext.Sets(),
	)
}

func compile(env *cel.Env, expr string) (cel.Program, error) {
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	return env.Program(ast,
		cel.EvalOptions(cel.OptOptimize, cel.OptTrackCost),
		cel.CostLimit(perCallLimit),
		cel.CostTrackerOptions(interpreter.PresenceTestHasCost(false)),
		cel.InterruptCheckFrequency(checkFrequency),
	)
}

var sink any

// medianNs: the median time per call of f over samples batches of about
// batch each, after calibrating the iterations per batch.
func medianNs(samples int, batch time.Duration, f func() any) float64 {
	n := 1
	for {
		t := time.Now()
		for i := 0; i < n; i++ {
			sink = f()
		}
		e := time.Since(t)
		if e >= batch/4 {
			n = int(float64(n)*batch.Seconds()/e.Seconds()) + 1
			break
		}
		n *= 2
	}
	per := make([]float64, samples)
	for s := range per {
		t := time.Now()
		for i := 0; i < n; i++ {
			sink = f()
		}
		per[s] = float64(time.Since(t).Nanoseconds()) / float64(n)
	}
	sort.Float64s(per)
	if samples%2 == 1 {
		return per[samples/2]
	}
	return (per[samples/2-1] + per[samples/2]) / 2
}

func main() {
	casesPath := flag.String("cases", "../cel.rs", "benches/cel.rs, whose CASES are timed")
	dataDir := flag.String("data", "../data", "benches/data")
	samples := flag.Int("samples", 31, "batches per figure")
	batchMs := flag.Int("batch-ms", 5, "milliseconds per batch")
	flag.Parse()

	cases, err := readCases(*casesPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "celgo:", err)
		os.Exit(2)
	}
	pods := map[string]map[string]any{}
	for _, p := range []string{"large", "small"} {
		b, err := os.ReadFile(filepath.Join(*dataDir, "pod-"+p+".json"))
		if err == nil {
			var m map[string]any
			err = json.Unmarshal(b, &m)
			pods[p] = m
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "celgo: pod-"+p+".json:", err)
			os.Exit(2)
		}
	}
	env, err := kubeEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "celgo: environment:", err)
		os.Exit(2)
	}
	batch := time.Duration(*batchMs) * time.Millisecond
	fmt.Printf("cel-go: median of %d samples of ~%d ms each\n", *samples, *batchMs)
	fmt.Println("name\tpod\tcompile_ns\teval_ns\tresult")
	status := 0
	for _, c := range cases {
		prog, err := compile(env, c.expr)
		if err != nil {
			fmt.Printf("%s\t%s\t-\t-\tcompile error: %s\n", c.name, c.pod, strings.ReplaceAll(err.Error(), "\n", " "))
			status = 1
			continue
		}
		obj := pods[c.pod]
		val, _, err := prog.Eval(map[string]any{"object": obj})
		if err != nil {
			fmt.Printf("%s\t%s\t-\t-\teval error: %s\n", c.name, c.pod, err)
			status = 1
			continue
		}
		result := "?"
		if v, err := val.ConvertToNative(reflect.TypeOf(&structpb.Value{})); err == nil {
			if b, err := protojson.Marshal(v.(*structpb.Value)); err == nil {
				result = string(b)
			}
		}
		expr := c.expr
		comp := medianNs(*samples, batch, func() any {
			p, err := compile(env, expr)
			if err != nil {
				return err
			}
			return p
		})
		ev := medianNs(*samples, batch, func() any {
			v, _, err := prog.Eval(map[string]any{"object": obj})
			if err != nil {
				return err
			}
			return v
		})
		fmt.Printf("%s\t%s\t%.0f\t%.0f\t%s\n", c.name, c.pod, comp, ev, result)
	}
	os.Exit(status)
}
