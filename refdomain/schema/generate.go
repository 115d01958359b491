package schema

//go:generate go run ../../cmd/codegen -schema . -out .. -pkg refdomain
