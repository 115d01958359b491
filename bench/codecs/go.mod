module github.com/mkit-dev/mkitfdb/bench/codecs

go 1.26.0

require (
	github.com/mkit-dev/mkitfdb v0.0.0
	github.com/tinylib/msgp v1.6.5
	google.golang.org/protobuf v1.36.12
)

require github.com/philhofer/fwd v1.2.0 // indirect

replace github.com/mkit-dev/mkitfdb => ../..
