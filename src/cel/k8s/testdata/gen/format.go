package main

import (
	"encoding/json"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"k8s.io/apiserver/pkg/cel/library"
)

func init() { extra = append(extra, formatMode) }

func formatMode(mode string, lines []string) bool {
	if mode != "format" {
		return false
	}
	for _, line := range lines {
		var s string
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			panic(err)
		}
		m := map[string]any{"in": s}
		for name := range library.ConstantFormats {
			v, e := eval("format.named(t).value().validate(s)", map[string]any{"s": s, "t": name})
			if e != "" {
				panic(e)
			}
			opt := v.(*types.Optional)
			if !opt.HasValue() {
				m[name] = nil
				continue
			}
			var msgs []string
			lst := opt.GetValue().(interface{ Get(ref.Val) ref.Val; Size() ref.Val })
			n := int(lst.Size().(types.Int))
			for i := 0; i < n; i++ {
				msgs = append(msgs, string(lst.Get(types.Int(i)).(types.String)))
			}
			m[name] = msgs
		}
		out(m)
	}
	return true
}
