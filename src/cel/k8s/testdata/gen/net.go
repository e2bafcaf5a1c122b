package main

import "github.com/google/cel-go/common/types/ref"

func init() { extra = append(extra, netMode) }

func val(v ref.Val, e string) any {
	if e != "" {
		return map[string]any{"err": e}
	}
	return v.Value()
}

func strOf(expr string, vars map[string]any) any {
	v, e := eval(expr, vars)
	return val(v, e)
}

func netMode(mode string, lines []string) bool {
	switch mode {
	case "net":
		for _, s := range lines {
			vars := map[string]any{"s": s}
			m := map[string]any{"in": s, "isIP": strOf("isIP(s)", vars), "isCIDR": strOf("isCIDR(s)", vars)}
			m["canonical"] = strOf("ip.isCanonical(s)", vars)
			if _, e := eval("ip(s)", vars); e != "" {
				m["ip"] = map[string]any{"err": e}
			} else {
				ip := map[string]any{}
				ip["str"] = strOf("string(ip(s))", vars)
				for _, f := range []string{"family", "isUnspecified", "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast", "isGlobalUnicast"} {
					ip[f] = strOf("ip(s)."+f+"()", vars)
				}
				m["ip"] = ip
			}
			if _, e := eval("cidr(s)", vars); e != "" {
				m["cidr"] = map[string]any{"err": e}
			} else {
				c := map[string]any{}
				c["str"] = strOf("string(cidr(s))", vars)
				c["ip"] = strOf("string(cidr(s).ip())", vars)
				c["masked"] = strOf("string(cidr(s).masked())", vars)
				c["prefixLength"] = strOf("cidr(s).prefixLength()", vars)
				m["cidr"] = c
			}
			out(m)
		}
	case "net-pairs":
		for _, s := range lines {
			if _, e := eval("cidr(s)", map[string]any{"s": s}); e != "" {
				continue
			}
			for _, t := range lines {
				vars := map[string]any{"s": s, "t": t}
				out(map[string]any{"a": s, "b": t,
					"containsIP": strOf("cidr(s).containsIP(t)", vars),
					"containsCIDR": strOf("cidr(s).containsCIDR(t)", vars),
					"eq": strOf("cidr(s) == cidr(t)", vars),
					"ipEq": strOf("ip(s) == ip(t)", vars)})
			}
		}
	default:
		return false
	}
	return true
}
