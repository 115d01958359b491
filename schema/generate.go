package schema

//go:generate go run ../cmd/codegen -schema . -out ../gen -pkg gen
