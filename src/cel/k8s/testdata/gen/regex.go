package main

import (
	"encoding/json"
	"regexp"
	"sort"
	"unicode"
)

func init() { extra = append(extra, regexMode) }

var haystacks = []string{"", "abc", "baaab", "a1b22c333", "Hello, World! 123", "x\ny\nz", "αβγ δ 42", "aaa", "foo.bar-baz_qux", "[x]{y}(z)"}

func regexMode(mode string, lines []string) bool {
	switch mode {
	case "unicode-names":
		keys := map[string]bool{"Any": true, "Assigned": true, "Ascii": true, "Lc": true}
		for k := range unicode.Categories {
			keys[k] = true
		}
		for k := range unicode.Scripts {
			keys[k] = true
		}
		for k := range unicode.CategoryAliases {
			keys[k] = true
		}
		var ok []string
		for k := range keys {
			if _, err := regexp.Compile(`\p{` + k + `}`); err == nil {
				ok = append(ok, k)
			}
		}
		sort.Strings(ok)
		out(ok)
	case "regex":
		for _, line := range lines {
			var p string
			if err := json.Unmarshal([]byte(line), &p); err != nil {
				panic(err)
			}
			m := map[string]any{"re": p}
			re, err := regexp.Compile(p)
			if err != nil {
				m["err"] = err.Error()
				out(m)
				continue
			}
			var finds []any
			for _, h := range haystacks {
				all := re.FindAllString(h, -1)
				if all == nil {
					all = []string{}
				}
				two := re.FindAllString(h, 2)
				if two == nil {
					two = []string{}
				}
				finds = append(finds, map[string]any{"find": re.FindString(h), "all": all, "two": two})
			}
			m["finds"] = finds
			out(m)
		}
	default:
		return false
	}
	return true
}
