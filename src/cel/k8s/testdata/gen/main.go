// Differential oracle: prints kube-apiserver v1.36 library results as JSON lines.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"

	"k8s.io/apimachinery/pkg/api/resource"
)

func out(v any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

func readLines() []string {
	var lines []string
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

func fbits(f float64) string {
	if math.IsNaN(f) {
		return "NaN"
	}
	return fmt.Sprintf("%v", f)
}

func qinfo(q resource.Quantity) map[string]any {
	c := q.DeepCopy()
	v, ok := c.AsInt64()
	c2 := q.DeepCopy()
	c3 := q.DeepCopy()
	return map[string]any{"str": c2.String(), "isInt": ok, "int": v, "float": fbits(c3.AsApproximateFloat64()), "sign": q.Sign()}
}

func main() {
	mode := os.Args[1]
	lines := readLines()
	for _, f := range extra {
		if f(mode, lines) {
			return
		}
	}
	switch mode {
	case "quantity":
		for _, s := range lines {
			q, err := resource.ParseQuantity(s)
			if err != nil {
				out(map[string]any{"in": s, "err": err.Error()})
				continue
			}
			m := qinfo(q)
			m["in"] = s
			out(m)
		}
	case "quantity-pairs":
		var qs []resource.Quantity
		var ins []string
		for _, s := range lines {
			q, err := resource.ParseQuantity(s)
			if err == nil {
				qs = append(qs, q)
				ins = append(ins, s)
			}
		}
		for i := range qs {
			for j := range qs {
				a := qs[i].DeepCopy()
				b := qs[j].DeepCopy()
				sum := a.DeepCopy()
				sum.Add(b.DeepCopy())
				diff := a.DeepCopy()
				diff.Sub(b.DeepCopy())
				out(map[string]any{"a": ins[i], "b": ins[j], "cmp": a.Cmp(b), "add": qinfo(sum), "sub": qinfo(diff)})
			}
		}
	case "quantity-int":
		ints := []int64{0, 1, -1, 7, 1000, -20000, 1 << 40, math.MaxInt64, math.MinInt64}
		for _, s := range lines {
			q, err := resource.ParseQuantity(s)
			if err != nil {
				continue
			}
			for _, n := range ints {
				sum := q.DeepCopy()
				sum.Add(*resource.NewQuantity(n, resource.DecimalExponent))
				diff := q.DeepCopy()
				diff.Sub(*resource.NewQuantity(n, resource.DecimalExponent))
				out(map[string]any{"a": s, "n": n, "add": qinfo(sum), "sub": qinfo(diff)})
			}
		}
	}
}

func init() { extra = append(extra, semverMode) }

var extra []func(string, []string) bool

func semverMode(mode string, lines []string) bool {
	if mode != "semver" {
		return false
	}
	for _, s := range lines {
		for _, norm := range []bool{false, true} {
			vars := map[string]any{"s": s, "n": norm}
			m := map[string]any{"in": s, "norm": norm}
			if _, e := eval("semver(s, n)", vars); e != "" {
				m["err"] = e
				out(m)
				continue
			}
			v, _ := eval("semver(s, n)", vars)
			m["str"] = v.Value().(interface{ String() string }).String()
			for _, f := range []string{"major", "minor", "patch"} {
				r, _ := eval("semver(s, n)."+f+"()", vars)
				m[f] = r.Value()
			}
			out(m)
		}
	}
	return true
}
