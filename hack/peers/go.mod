module interlock.dev/hack/peers

go 1.26.0
