module github.com/edgemq/edgemq

go 1.26.0

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/klauspost/compress v1.20.4
	github.com/tinylib/msgp v1.6.5
	go.etcd.io/bbolt v1.5.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.50.0
)

require github.com/philhofer/fwd v1.2.0 // indirect
