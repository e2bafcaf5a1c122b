// sigs-yaml reads one YAML document on standard input with
// sigs.k8s.io/yaml, as kubectl does, and prints it as JSON, or "ERR " and
// the parser's error. The manifest reader's differential test
// (src/manifest/differential_tests.rs) compares with it when
// INTERLOCK_SIGS_YAML names the built binary:
//
//	cd hack/sigs-yaml && go build -o /tmp/sigs-yaml . &&
//	INTERLOCK_SIGS_YAML=/tmp/sigs-yaml cargo test --lib differential
package main

import (
	"fmt"
	"io"
	"os"

	"sigs.k8s.io/yaml"
)

func main() {
	b, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Println("ERR", err)
		return
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		fmt.Println("ERR", err)
		return
	}
	fmt.Println(string(j))
}
