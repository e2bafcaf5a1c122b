package main

import (
	"net/url"
)

func init() { extra = append(extra, urlMode) }

func urlMode(mode string, lines []string) bool {
	if mode != "url" {
		return false
	}
	for _, s := range lines {
		vars := map[string]any{"s": s}
		m := map[string]any{"in": s, "isURL": strOf("isURL(s)", vars)}
		if v, e := eval("url(s)", vars); e != "" {
			m["err"] = e
		} else {
			m["str"] = v.Value().(*url.URL).String()
			for _, f := range []string{"getScheme", "getHost", "getHostname", "getPort", "getEscapedPath"} {
				m[f] = strOf("url(s)."+f+"()", vars)
			}
			m["query"] = v.Value().(*url.URL).Query()
		}
		m["uri"] = strOf("format.uri().validate(s)", vars)
		out(m)
	}
	return true
}
