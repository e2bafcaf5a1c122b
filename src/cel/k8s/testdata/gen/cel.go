package main

import (
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/ref"
	"k8s.io/apiserver/pkg/cel/library"
)

var env *cel.Env

func init() {
	var err error
	env, err = cel.NewEnv(
		cel.Variable("s", cel.StringType),
		cel.Variable("t", cel.StringType),
		cel.Variable("n", cel.BoolType),
		cel.Variable("i", cel.IntType),
		cel.OptionalTypes(),
		library.SemverLib(library.SemverVersion(1)),
		library.IP(), library.CIDR(), library.URLs(), library.Format(), library.Regex(), library.Quantity(),
	)
	if err != nil {
		panic(err)
	}
}

var progs = map[string]cel.Program{}

// eval returns (value, errString)
func eval(expr string, vars map[string]any) (ref.Val, string) {
	p, ok := progs[expr]
	if !ok {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			panic(iss.Err())
		}
		p, _ = env.Program(ast)
		progs[expr] = p
	}
	v, _, err := p.Eval(vars)
	if err != nil {
		return nil, err.Error()
	}
	return v, ""
}
