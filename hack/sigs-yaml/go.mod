module interlock.dev/hack/sigs-yaml

go 1.22

require (
	sigs.k8s.io/yaml v1.6.0
	go.yaml.in/yaml/v2 v2.4.3
)
